#!/bin/bash
# test/bench/lease-osd.sh [GRACE [INTERVAL]]: how long a gateway group is served by
# no gateway when its lease object's primary OSD stops answering.
#
# A cluster of two OSDs on this machine (test/ceph/cluster.sh, pool "pair"
# of size 2, min size 1), two gateways of one group on NVMe/TCP over
# loopback (no host needed: the gateways' own states are what is timed),
# the lease object and the image in pool "pair". The lease object's primary
# OSD is stopped with SIGSTOP: its connections stay open, as with a host
# that died or a network that dropped it, so only the heartbeats tell
# the monitor (a killed OSD's peers see its connections refused and
# report it at once). GRACE (default 20, Ceph's) is osd_heartbeat_grace
# and INTERVAL (default 6) osd_heartbeat_interval, the settings that bound
# the outage; mon_osd_min_down_reporters is 1, as two OSDs have one peer
# each.
#
# It prints when the owner stepped down, when the monitor marked the OSD
# down, and when a gateway owned the group again, from the SIGSTOP. Run as
# root; it needs ceph-mon, ceph-osd, rbd and Go (about 90 s).
set -euo pipefail
grace=${1:-20} interval=${2:-6}
root=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d /tmp/lease-osd.XXXXXX)
C=$W/ceph
A_PID="" B_PID="" OSD_PID=""
finish() {
	[ -z "$OSD_PID" ] || kill -CONT "$OSD_PID" 2>/dev/null || true
	for p in $A_PID $B_PID; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	"$root/test/ceph/cluster.sh" stop "$C" >/dev/null 2>&1 || true
	rm -rf "$W"
}
trap finish EXIT
(cd "$root" && go build -o "$W/nvmeof-tgt" ./cmd/nvmeof-tgt)
CEPH_OSD_SIZE=$((1 << 30)) "$root/test/ceph/cluster.sh" start "$C" 6811 >/dev/null
"$root/test/ceph/cluster.sh" add-osd "$C" pair >/dev/null 2>&1
# shellcheck source=/dev/null
. "$C/env"
mon() { "$C/cephmon" -conf "$CEPH_CONF" -name client.admin -keyring "$CEPH_ADMIN_KEYRING" "$1"; }
mon '{"prefix": "config set", "who": "mon", "name": "mon_osd_min_down_reporters", "value": "1"}' >/dev/null
mon "{\"prefix\": \"config set\", \"who\": \"global\", \"name\": \"osd_heartbeat_grace\", \"value\": \"$grace\"}" >/dev/null
mon "{\"prefix\": \"config set\", \"who\": \"global\", \"name\": \"osd_heartbeat_interval\", \"value\": \"$interval\"}" >/dev/null
rbd --conf "$CEPH_CONF" --id admin --keyring "$CEPH_ADMIN_KEYRING" create --size 64M pair/lease-osd

# gateway NAME PORT: a gateway's configuration.
gateway() {
	cat <<CFG
control: {socket: $W/$1.sock}
state_file: $W/$1-state.json
ceph: {conf: $CEPH_CONF, user: $CEPH_USER, keyring: $CEPH_KEYRING}
gateway: {name: $1, pool: pair, lease_prefix: lease-osd, lease_seconds: 10, groups: [1]}
ports: [{id: 1, transport: tcp, address: 127.0.0.1, port: $2}]
subsystems:
  - nqn: nqn.2026-11.io.example:lease-osd
    serial: LEASEOSD1
    allow_any_host: true
    cntlid_min: $(($2 - 4419))
    cntlid_max: $(($2 - 4419))
    namespaces: [{nsid: 1, backend: rbd, pool: pair, image: lease-osd, uuid: 4b1f0c7e-0d2a-4e3b-9c5d-6e7f80912a3b}]
CFG
}
gateway gw-a 4420 >"$W/a.yaml"
gateway gw-b 4421 >"$W/b.yaml"
state() { timeout 5 "$W/nvmeof-tgt" ctl -socket "$W/$1.sock" list -json 2>/dev/null | jq -r '.gateway.groups[0].state' || true; }
waitfor() { # SECONDS WHAT CMD...
	local end=$((SECONDS + $1)) what=$2
	shift 2
	until "$@"; do
		[ $SECONDS -lt $end ] || { echo "lease-osd: $what: not within the time" >&2; exit 1; }
		sleep 0.1
	done
}
"$W/nvmeof-tgt" -config "$W/a.yaml" >"$W/a.log" 2>&1 &
A_PID=$!
waitfor 30 "A owning the group" eval '[ "$(state gw-a)" = owner ]'
"$W/nvmeof-tgt" -config "$W/b.yaml" >"$W/b.log" 2>&1 &
B_PID=$!
waitfor 30 "B standing by" eval '[ "$(state gw-b)" = standby ]'

primary=$(mon '{"prefix": "osd map", "pool": "pair", "object": "lease-osd.group.1", "format": "json"}' | jq .acting_primary)
OSD_PID=$(cat "$C/run/osd.$primary.pid")
osd_up() { mon '{"prefix": "osd dump", "format": "json"}' | jq -e ".osds[] | select(.osd == $primary) | .up == 1" >/dev/null; }
ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
t0=$(ms)
kill -STOP "$OSD_PID"
stepped="" marked="" owned=""
while [ -z "$owned" ]; do
	now=$(($(ms) - t0))
	[ $now -lt 180000 ] || { echo "lease-osd: no owner 180 s after the SIGSTOP" >&2; exit 1; }
	a=$(state gw-a) b=$(state gw-b)
	[ -n "$stepped" ] || [ "$a" = owner ] || stepped=$now
	[ -n "$marked" ] || osd_up || marked=$now
	if [ -n "$stepped" ] && { [ "$a" = owner ] || [ "$b" = owner ]; }; then
		owned=$now
		[ "$a" = owner ] && who=gw-a || who=gw-b
	fi
	sleep 0.1
done
kill -CONT "$OSD_PID"
OSD_PID=""
echo "osd_heartbeat_grace $grace s, osd_heartbeat_interval $interval s, lease 10 s (deadline 7 s), the lease object's primary osd.$primary stopped:"
echo "  the owner stepped down after $((stepped / 1000)).$(printf %03d $((stepped % 1000))) s"
echo "  the monitor marked osd.$primary down after $((${marked:-0} / 1000)).$(printf %03d $((${marked:-0} % 1000))) s"
echo "  $who owned the group after $((owned / 1000)).$(printf %03d $((owned % 1000))) s: served by no gateway for $(((owned - stepped) / 1000)).$(printf %03d $(((owned - stepped) % 1000))) s"
