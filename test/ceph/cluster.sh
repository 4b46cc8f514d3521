#!/bin/bash
# A real single-node Ceph cluster for the tests, from Debian's packages:
# one monitor, one BlueStore OSD on a sparse file, a replicated pool of
# size 1, cephx on, and a client user limited to RBD on that pool.
#
#   cluster.sh start DIR [MON_PORT]   create and start it (DIR on ext4 or XFS:
#                                     BlueStore opens its file with O_DIRECT)
#   cluster.sh stop DIR               stop every daemon of it
#   cluster.sh stop-osd DIR [ID]      stop osd.ID, 0 by default (it marks
#                                     itself down)
#   cluster.sh kill-osd DIR           kill osd.0 (SIGKILL, as a crash: nothing
#                                     tells the monitor, clients time out)
#   cluster.sh start-osd DIR [ID]     start it again (unless it is up) and wait
#                                     until it is up
#   cluster.sh add-osd DIR            add a second OSD, osd.1, under a CRUSH
#                                     root of its own, and pool "apart" (RBD,
#                                     the client user may use it) on it alone:
#                                     a test can keep objects apart from the
#                                     rbd pool's, on another OSD
#   cluster.sh add-osd DIR pair       osd.1 beside osd.0 instead (as another
#                                     host), and pool "pair" of size 2 (min
#                                     size 1) on both: every object has a
#                                     replica on each OSD
#
# After start, DIR/env holds the paths a client needs (sourced by scripts):
# CEPH_CONF, CEPH_ADMIN_KEYRING, CEPH_USER (the RBD client, without
# "client."), CEPH_KEYRING (its keyring) and CEPH_POOL.
set -euo pipefail
# Everything is passed explicitly; Ceph would take these from the
# environment over ceph.conf (a CEPH_KEYRING of a client, as DIR/env
# exports, would make the OSD present the client's key).
unset CEPH_KEYRING CEPH_ARGS CEPH_CONF

usage() { sed -n '2,26p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 C=$(realpath -m "$2") port=${3:-6789}
pool=rbd user=nvmeof

# mon JSON [INPUT]: a monitor command as the administrator, through
# cephmon (cmd/cephmon: librados; the ceph tool starts Python, seconds in
# an emulated guest). CEPHMON names a built one; else start builds it into
# DIR, with Go.
CEPHMON=${CEPHMON:-$C/cephmon}
mon() { "$CEPHMON" -conf "$C/ceph.conf" -name client.admin -keyring "$C/admin.keyring" ${2:+-in "$2"} "$1"; }

# waitfor DESC SECONDS COMMAND...: poll until COMMAND succeeds.
waitfor() {
	local desc=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if [ $SECONDS -ge $deadline ]; then
			echo "cluster.sh: $desc: not after ${secs}s; see $C/log" >&2
			return 1
		fi
		sleep 0.5
	done
}

# osdn ID FILTER: jq FILTER on osd.ID's entry in the OSD map.
osdn() { mon '{"prefix": "osd dump", "format": "json"}' 2>/dev/null | jq -e ".osds[] | select(.osd == $1) | $2"; }
osd_up() { osdn "${1:-0}" '.up == 1' >/dev/null; }
osd_down() { ! osd_up "$@"; }
# up_from [ID]: the map epoch the running OSD instance came up in.
up_from() { osdn "${1:-0}" .up_from || true; }
# osd_booted EPOCH [ID]: up, as an instance newer than the one up from EPOCH (a
# killed OSD stays "up" in the map until its successor boots).
osd_booted() { osd_up "${2:-0}" && [ "$(up_from "${2:-0}")" != "$1" ]; }

pidof_daemon() { [ -f "$C/run/$1.pid" ] && cat "$C/run/$1.pid"; }
# exited PID: gone, or a zombie (the daemons are init's children, and an
# init may take its time to reap them).
exited() {
	local _ state
	read -r _ _ state _ 2>/dev/null <"/proc/$1/stat" || return 0
	[ "$state" = Z ]
}
running() { local pid; pid=$(pidof_daemon "$1") && ! exited "$pid"; }

stop_daemon() { # name [signal]
	local pid
	pid=$(pidof_daemon "$1") || return 0
	kill -"${2:-TERM}" "$pid" 2>/dev/null || return 0
	waitfor "$1 to exit" 60 exited "$pid"
}

# start_osd [ID]: start osd.ID (0) unless it is up.
start_osd() {
	local id=${1:-0} before
	running "osd.$id" && osd_up "$id" && return 0
	before=$(up_from "$id")
	ceph-osd --conf "$C/ceph.conf" -i "$id"
	waitfor "osd.$id up" 120 osd_booted "$before" "$id"
}

# mkfs_osd ID: create osd.ID's key, register it with the monitor, and
# make its BlueStore.
mkfs_osd() {
	local uuid key
	uuid=$(cat /proc/sys/kernel/random/uuid)
	key=$(ceph-authtool --gen-print-key)
	echo "{\"cephx_secret\": \"$key\"}" | mon "{\"prefix\": \"osd new\", \"uuid\": \"$uuid\", \"id\": $1}" - >/dev/null
	ceph-authtool --create-keyring "$C/osd$1/keyring" --name "osd.$1" --add-key "$key" >/dev/null
	ceph-osd --conf "$C/ceph.conf" -i "$1" --mkfs --osd-uuid "$uuid" 2>>"$C/log/mkfs.log"
}

# add_osd [apart|pair]: osd.1, started. apart: the only OSD under CRUSH
# root "apart", and pool "apart" on that root; osd.0 and the rbd pool are
# untouched (no data moves). pair: under the default root as a host of its
# own, and pool "pair", size 2, on both OSDs. Once made, a second call
# only starts osd.1.
add_osd() {
	local kind=${1:-apart}
	if [ -e "$C/osd1/keyring" ]; then
		start_osd 1
		return
	fi
	mkdir -p "$C/osd1"
	local location="root=apart host=apart-host"
	[ "$kind" = pair ] && location="root=default host=pair-host"
	cat >>"$C/ceph.conf" <<CONF
[osd.1]
osd data = $C/osd1
keyring = $C/osd1/keyring
crush location = $location
CONF
	# The OSD puts itself, at its start, under its root (made then).
	mkfs_osd 1
	start_osd 1
	if [ "$kind" = pair ]; then
		mon '{"prefix": "osd pool create", "pool": "pair", "pg_num": 8}' >/dev/null 2>&1
		mon '{"prefix": "osd pool set", "pool": "pair", "var": "size", "val": "2"}' >/dev/null
		mon '{"prefix": "osd pool set", "pool": "pair", "var": "min_size", "val": "1"}' >/dev/null
	else
		mon '{"prefix": "osd crush rule create-simple", "name": "apart", "root": "apart", "type": "osd"}' >/dev/null
		mon '{"prefix": "osd pool create", "pool": "apart", "pg_num": 8, "rule": "apart"}' >/dev/null 2>&1
	fi
	mon "{\"prefix\": \"osd pool application enable\", \"pool\": \"$kind\", \"app\": \"rbd\"}" >/dev/null
	mon "{\"prefix\": \"auth caps\", \"entity\": \"client.$user\", \"caps\": [\"mon\", \"profile rbd\", \"osd\", \"profile rbd pool=$pool, profile rbd pool=$kind\"]}" >/dev/null
	if [ "$kind" = pair ]; then
		echo CEPH_POOL_PAIR=pair >>"$C/env"
	else
		echo CEPH_POOL_APART=apart >>"$C/env"
	fi
}

start() {
	for t in ceph-mon ceph-osd ceph-authtool monmaptool rbd; do
		command -v $t >/dev/null || { echo "cluster.sh: $t is missing (apt-get install ceph-mon ceph-osd ceph-common)" >&2; exit 1; }
	done
	if [ -e "$C/ceph.conf" ]; then
		echo "cluster.sh: $C already holds a cluster" >&2
		exit 1
	fi
	mkdir -p "$C/mon" "$C/osd0" "$C/run" "$C/log"
	if [ ! -x "$CEPHMON" ]; then
		(cd "$(dirname "$0")/cmd/cephmon" && go build -o "$CEPHMON" .) ||
			{ echo "cluster.sh: building cephmon (CEPHMON unset: needs Go and librados-dev)" >&2; exit 1; }
	fi
	local fsid
	fsid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$C/ceph.conf" <<CONF
[global]
fsid = $fsid
mon host = [v1:127.0.0.1:$port]
ms bind msgr2 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
run dir = $C/run
pid file = $C/run/\$name.pid
log file = $C/log/\$name.log
admin socket = $C/run/\$name.asok
osd objectstore = bluestore
bluestore block create = true
bluestore block size = ${CEPH_OSD_SIZE:-4294967296}
osd memory target = 939524096
bluestore cache autotune = false
bluestore cache size = 134217728
[client.admin]
keyring = $C/admin.keyring
[mon.a]
mon data = $C/mon
keyring = $C/mon/keyring
[osd.0]
osd data = $C/osd0
keyring = $C/osd0/keyring
CONF
	# Keys: the monitors' own, an administrator with every cap, the OSD's.
	ceph-authtool --create-keyring "$C/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
	ceph-authtool --create-keyring "$C/admin.keyring" --gen-key -n client.admin \
		--cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
	ceph-authtool "$C/mon.keyring" --import-keyring "$C/admin.keyring" >/dev/null
	monmaptool --create --addv a "[v1:127.0.0.1:$port]" --fsid "$fsid" "$C/monmap" >/dev/null
	ceph-mon --conf "$C/ceph.conf" --mkfs -i a --monmap "$C/monmap" --keyring "$C/mon.keyring"
	cp "$C/mon.keyring" "$C/mon/keyring"
	ceph-mon --conf "$C/ceph.conf" -i a
	mkfs_osd 0
	start_osd
	mon "{\"prefix\": \"osd pool create\", \"pool\": \"$pool\", \"pg_num\": 8}" >/dev/null 2>&1
	rbd --conf "$C/ceph.conf" --name client.admin --keyring "$C/admin.keyring" pool init "$pool"
	# The user the target runs as: RBD on one pool, nothing else.
	mon "{\"prefix\": \"auth get-or-create\", \"entity\": \"client.$user\", \"caps\": [\"mon\", \"profile rbd\", \"osd\", \"profile rbd pool=$pool\"]}" \
		>"$C/$user.keyring" 2>/dev/null
	cat >"$C/env" <<ENV
CEPH_CONF=$C/ceph.conf
CEPH_ADMIN_KEYRING=$C/admin.keyring
CEPH_USER=$user
CEPH_KEYRING=$C/$user.keyring
CEPH_POOL=$pool
ENV
}

case $cmd in
start) start ;;
stop)
	stop_daemon osd.1
	stop_daemon osd.0
	stop_daemon mon.a
	;;
stop-osd)
	stop_daemon "osd.${3:-0}"
	waitfor "osd.${3:-0} down" 30 osd_down "${3:-0}"
	;;
kill-osd) stop_daemon osd.0 KILL ;;
start-osd) start_osd "${3:-0}" ;;
add-osd)
	case ${3:-apart} in
	apart | pair) add_osd "${3:-apart}" ;;
	*) usage ;;
	esac
	;;
*) usage ;;
esac
