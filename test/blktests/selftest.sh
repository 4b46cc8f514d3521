#!/bin/bash
# Checks nvme-target-control without a daemon: NVMEOF_TGT points at a stub
# that records each call and answers `ctl list -json` with canned JSON.
# Exits non-zero if any check fails.
#
#   test/blktests/selftest.sh [SCRIPT]    (default: nvme-target-control here)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
script=${1:-$here/nvme-target-control}
tmp=$(mktemp -d)
# A check that fails with the shim mounted must not leave it behind.
trap 'umount "$tmp/nvmet" 2>/dev/null || true; rm -rf "$tmp"' EXIT

failures=0
checks=0

fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

# expect_eq WHAT GOT WANT
expect_eq() {
	checks=$((checks + 1))
	if [[ $2 != "$3" ]]; then
		fail "$1"
		printf '  got:  %s\n' "${2//$'\n'/$'\n'        }" >&2
		printf '  want: %s\n' "${3//$'\n'/$'\n'        }" >&2
	fi
}

# expect_match WHAT TEXT GLOB
expect_match() {
	checks=$((checks + 1))
	# shellcheck disable=SC2053
	if [[ $2 != $3 ]]; then
		fail "$1: '$2' does not match '$3'"
	fi
}

# The stub: logs "ARGS" per call to $STUB_LOG and the socket it was given
# to $STUB_LOG.sock. STUB_LIST is the file `ctl list -json` prints (none:
# the daemon is down); STUB_EXISTING the subsystems `remove subsystem`
# finds; a call starting with STUB_REFUSE (else with the contents of
# $STUB_LOG.refuse) fails with STUB_REFUSE_MSG. With STUB_STATE, a JSON
# file, `list -json` prints it and `add subsystem NQN -host H` and
# `remove subsystem NQN` edit it, as the daemon would its state.
stub=$tmp/nvmeof-tgt
cat >"$stub" <<'STUB'
#!/bin/bash
echo "$*" >>"$STUB_LOG"
echo "${NVMEOF_TGT_SOCKET:-}" >>"$STUB_LOG.sock"
[[ $1 == ctl ]] || { echo "stub: not a ctl call: $*" >&2; exit 2; }
shift
refuse=${STUB_REFUSE:-$(cat "$STUB_LOG.refuse" 2>/dev/null)}
if [[ -n $refuse && "$*" == "$refuse"* ]]; then
	echo "nvmeof-tgt ctl: ${STUB_REFUSE_MSG:-refused}" >&2
	exit 1
fi
# edit FILTER ARG...: applies the jq FILTER to STUB_STATE.
edit() {
	jq "$@" "$STUB_STATE" >"$STUB_STATE.new" && mv "$STUB_STATE.new" "$STUB_STATE"
}
case "$*" in
"list -json")
	if [[ -n ${STUB_STATE:-} ]]; then
		cat "$STUB_STATE"
	elif [[ -n ${STUB_LIST:-} ]]; then
		cat "$STUB_LIST"
	else
		echo "nvmeof-tgt ctl: no daemon answers at /run/nvmeof-tgt/ctl.sock" >&2
		exit 1
	fi
	;;
"remove subsystem "*)
	if [[ -n ${STUB_STATE:-} ]] && jq -e --arg n "$3" 'any(.subsystems[]; .nqn == $n)' "$STUB_STATE" >/dev/null; then
		edit --arg n "$3" '.subsystems |= map(select(.nqn != $n))'
	elif [[ " ${STUB_EXISTING:-} " != *" $3 "* ]]; then
		echo "nvmeof-tgt ctl: no subsystem $3" >&2
		exit 1
	fi
	;;
"add subsystem "*)
	if [[ -n ${STUB_STATE:-} ]]; then
		edit --arg n "$3" --arg h "$5" '.subsystems += [{nqn: $n, hosts: [$h], ports: [], namespaces: []}]'
	fi
	;;
"add namespace "*)
	# setup's: add namespace NQN -nsid 1 -backend B -path P ... -uuid U
	if [[ -n ${STUB_STATE:-} ]]; then
		edit --arg n "$3" --arg b "$7" --arg p "$9" --arg u "${*: -1}" \
			'(.subsystems[] | select(.nqn == $n) | .namespaces) += [{nsid: 1, backend: $b, path: $p, size_bytes: 1048576, block_size: 512, uuid: $u, ana_group: 1}]'
	fi
	;;
"set host "*) ;;
*)
	echo "stub: unexpected call: $*" >&2
	exit 2
	;;
esac
STUB
chmod +x "$stub"

cat >"$tmp/two-ports.json" <<'JSON'
{"generation":3,"ports":[{"id":1,"address":"10.0.0.1","port":4420},{"id":2,"address":"10.0.0.2","port":4421}],"subsystems":[]}
JSON
# A daemon with ports of both transports names each one's.
cat >"$tmp/mixed-ports.json" <<'JSON'
{"generation":4,"ports":[{"id":1,"transport":"rdma","address":"10.0.0.1","port":4420},{"id":2,"transport":"tcp","address":"10.0.0.3","port":4420},{"id":3,"transport":"tcp","address":"10.0.0.1","port":4421}],"subsystems":[]}
JSON
cat >"$tmp/no-ports.json" <<'JSON'
{"generation":1,"ports":[],"subsystems":[]}
JSON

img=$tmp/img
mkdir -p "$tmp/cfg/blktests" "$img"
envfile=$tmp/cfg/blktests/nvmeof-tgt.env

# run [VAR=VALUE...] -- ARG...: runs the script in a clean environment,
# setting out, err and rc, and log to the stub calls made.
run() {
	local -a vars=()
	while [[ $1 != -- ]]; do
		vars+=("$1")
		shift
	done
	shift
	: >"$tmp/log"
	: >"$tmp/log.sock"
	rc=0
	env -i PATH="$PATH" HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/cfg" \
		NVMEOF_TGT="$stub" STUB_LOG="$tmp/log" STUB_LIST="$tmp/two-ports.json" \
		NVMET_IMG_DIR="$img" NVMET_CFS_SHIM="$tmp/no-nvmet-cfs" NVMET_CFS_DIR="$tmp/nvmet" \
		NVMET_CFS_LOG="$tmp/cfs.log" "${vars[@]}" \
		"$script" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	out=$(cat "$tmp/out")
	err=$(cat "$tmp/err")
	log=$(cat "$tmp/log")
}

host=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555
uuid=91fdba0d-f87b-4c25-b80f-db7be1418b9e

echo "== config"
for c in "--show-subsysnqn blktests-subsystem-1" \
	"--show-subsys-uuid $uuid" \
	"--show-trtype rdma" \
	"--show-blkdev-type file" \
	"--show-traddr 10.0.0.1" \
	"--show-trsvid 4420"; do
	run -- config "${c%% *}"
	expect_eq "config ${c%% *}" "$rc:$out" "0:${c#* }"
done
run -- config --show-subsysnqn --show-trsvid
expect_eq "config shows several values in order" "$rc:$out" "0:blktests-subsystem-1"$'\n'"4420"
run NVMET_TRADDR=10.0.0.2 -- config --show-trsvid
expect_eq "trsvid of the port at NVMET_TRADDR" "$rc:$out" "0:4421"
run NVMET_TRADDR=192.0.2.9 -- config --show-traddr --show-trsvid
expect_eq "NVMET_TRADDR without a matching port" "$rc:$out" "0:192.0.2.9"$'\n'"4420"
run STUB_LIST= NVMET_TRADDR=192.0.2.9 -- config --show-trsvid
expect_eq "trsvid with the daemon down" "$rc:$out" "0:4420"
mixed=STUB_LIST=$tmp/mixed-ports.json
run "$mixed" -- config --show-trtype --show-traddr --show-trsvid
expect_eq "rdma picks the daemon's RDMA port" "$rc:${out//$'\n'/,}" "0:rdma,10.0.0.1,4420"
run "$mixed" NVMET_TRTYPE=tcp -- config --show-trtype --show-traddr --show-trsvid
expect_eq "tcp picks the daemon's first TCP port" "$rc:${out//$'\n'/,}" "0:tcp,10.0.0.3,4420"
run "$mixed" NVMET_TRTYPE=tcp NVMET_TRADDR=10.0.0.1 -- config --show-trsvid
expect_eq "tcp: the service ID of the TCP port at NVMET_TRADDR, not the RDMA one's" "$rc:$out" "0:4421"
run NVMET_TRTYPE=tcp -- config --show-traddr
expect_eq "tcp against a daemon whose ports are RDMA (no transport named) fails" "$rc" 1
expect_match "the error names the transport and the setting" "$err" "*no tcp port*NVMET_TRTYPE*"
run NVMET_TRTYPE=fc -- config --show-trtype
expect_eq "a transport the daemon lacks fails" "$rc" 1
expect_match "the error names NVMET_TRTYPE" "$err" "*NVMET_TRTYPE=fc*rdma or tcp*"
run NVMET_BLKDEV=/dev/nullb0 -- config --show-blkdev-type
expect_eq "NVMET_BLKDEV makes the type device" "$rc:$out" "0:device"
run NVMET_BLKDEV_TYPE=disk -- config --show-blkdev-type
expect_eq "a bad NVMET_BLKDEV_TYPE fails" "$rc" 1
run NVMET_BLKDEV_TYPE=file NVMET_TRTYPE=rdma NVMET_HOSTNQN=hq NVMET_HOSTID=hi \
	NVMET_HOST_TRADDR=10.0.0.9 NVMET_TRADDR=10.1.1.1 NVMET_TRSVCID=4430 \
	NVMET_SUBSYS_UUID=u NVMET_SUBSYSNQN=s -- config --show-blkdev-type --show-trtype \
	--show-hostnqn --show-hostid --show-host-traddr --show-traddr --show-trsvid \
	--show-subsys-uuid --show-subsysnqn
expect_eq "every value from the environment" "$rc:${out//$'\n'/,}" \
	"0:file,rdma,hq,hi,10.0.0.9,10.1.1.1,4430,u,s"
expect_eq "no ctl call when everything is set" "$log" ""

want_hostnqn=$(head -n1 /etc/nvme/hostnqn 2>/dev/null | tr -d ' \t\r' || true)
want_hostid=$(head -n1 /etc/nvme/hostid 2>/dev/null | tr -d ' \t\r' || true)
run -- config --show-hostnqn --show-hostid
expect_eq "hostnqn and hostid defaults" "$rc:$out" \
	"0:${want_hostnqn:-nqn.2014-08.org.nvmexpress:uuid:0f01fb42-9f7f-4856-b0b3-51e60b8de349}"$'\n'"${want_hostid:-0f01fb42-9f7f-4856-b0b3-51e60b8de349}"

run STUB_LIST="$tmp/no-ports.json" -- config --show-traddr
expect_eq "traddr without ports fails" "$rc:$out" "1:"
expect_match "traddr without ports says why" "$err" "*no rdma port*NVMET_TRADDR*"
run STUB_LIST= -- config --show-traddr
expect_eq "traddr with the daemon down fails" "$rc:$out" "1:"
expect_match "traddr with the daemon down says why" "$err" "*NVMET_TRADDR*"

echo "== settings file"
cat >"$envfile" <<'ENV'
NVMET_SUBSYSNQN=from-file
NVMET_TRSVCID=4999
NVMEOF_TGT_SOCKET=/tmp/from-file.sock
ENV
run -- config --show-subsysnqn --show-trsvid
expect_eq "values from the settings file" "$rc:$out" "0:from-file"$'\n'"4999"
run NVMET_SUBSYSNQN=from-env -- config --show-subsysnqn
expect_eq "the environment wins over the file" "$rc:$out" "0:from-env"
run -- cleanup --subsysnqn s1
expect_eq "the file's socket reaches ctl" "$(cat "$tmp/log.sock")" "/tmp/from-file.sock"
rm "$envfile"
run NVMEOF_TGT_SOCKET=/tmp/env.sock -- cleanup --subsysnqn s1
expect_eq "the environment's socket reaches ctl" "$(cat "$tmp/log.sock")" "/tmp/env.sock"

echo "== usage errors"
for args in "" "frobnicate" "config" "config --show-nothing" "config --show-traddr=x" \
	"setup --subsysnqn s --subsys-uuid $uuid" \
	"setup --subsysnqn s --subsys-uuid $uuid --hostnqn $host --frob 1" \
	"setup --subsysnqn s --subsys-uuid $uuid --hostnqn" \
	"setup --subsysnqn s --subsys-uuid $uuid --hostnqn $host extra" \
	"cleanup" "cleanup --subsysnqn s --hostnqn $host"; do
	# shellcheck disable=SC2086
	run -- $args
	expect_eq "'$args' exits 2" "$rc" 2
	expect_match "'$args' prints usage on stderr" "$err" "*usage:*"
	expect_eq "'$args' calls no ctl" "$log" ""
done
run -- --help
expect_eq "--help exits 0 with usage" "$rc:${out:0:6}" "0:usage:"

echo "== setup"
touch "$img/blktests-subsystem-1.img"
run -- setup --subsysnqn blktests-subsystem-1 --subsys-uuid "$uuid" --hostnqn "$host"
expect_eq "setup, file" "$rc:$log" "0:ctl remove subsystem blktests-subsystem-1
ctl add subsystem blktests-subsystem-1 -host $host
ctl add namespace blktests-subsystem-1 -nsid 1 -backend file -path $img/blktests-subsystem-1.img -size 1GiB -uuid $uuid"
[[ ! -e $img/blktests-subsystem-1.img ]] || fail "setup left a stale image file"
checks=$((checks + 1))

run STUB_EXISTING="other blktests-subsystem-2" NVMET_IMG_SIZE=64MiB -- setup \
	--subsysnqn=blktests-subsystem-2 --subsys-uuid="$uuid" --hostnqn="$host"
expect_eq "setup over an existing subsystem, --opt=value" "$rc:$log" "0:ctl remove subsystem blktests-subsystem-2
ctl add subsystem blktests-subsystem-2 -host $host
ctl add namespace blktests-subsystem-2 -nsid 1 -backend file -path $img/blktests-subsystem-2.img -size 64MiB -uuid $uuid"

run NVMET_BLKDEV=/dev/nullb0 -- setup --hostnqn "$host" --subsys-uuid "$uuid" --subsysnqn s3
expect_eq "setup, device" "$rc:$log" "0:ctl remove subsystem s3
ctl add subsystem s3 -host $host
ctl add namespace s3 -nsid 1 -backend block -path /dev/nullb0 -uuid $uuid"

run NVMET_SETUP_NAMESPACE=no -- setup --subsysnqn s3 --subsys-uuid "$uuid" --hostnqn "$host"
expect_eq "setup, NVMET_SETUP_NAMESPACE=no: no namespace" "$rc:$log" "0:ctl remove subsystem s3
ctl add subsystem s3 -host $host"
run NVMET_SETUP_RESERVATIONS=yes -- setup --subsysnqn s3 --subsys-uuid "$uuid" --hostnqn "$host"
expect_eq "setup, NVMET_SETUP_RESERVATIONS=yes: namespace 1 with reservations" "$rc:$log" "0:ctl remove subsystem s3
ctl add subsystem s3 -host $host
ctl add namespace s3 -nsid 1 -backend file -path $img/s3.img -size 1GiB -reservations -uuid $uuid"
run NVMET_SETUP_RESERVATIONS=1 -- setup --subsysnqn s3 --subsys-uuid "$uuid" --hostnqn "$host"
expect_match "setup, a bad NVMET_SETUP_RESERVATIONS fails and says why" "$rc:$err" "1:*NVMET_SETUP_RESERVATIONS=1*"
run NVMET_SETUP_NAMESPACE=maybe -- setup --subsysnqn s3 --subsys-uuid "$uuid" --hostnqn "$host"
expect_eq "setup, a bad NVMET_SETUP_NAMESPACE: exit 1" "$rc" 1
expect_match "setup, a bad NVMET_SETUP_NAMESPACE says why" "$err" "*NVMET_SETUP_NAMESPACE=maybe*"

run NVMET_BLKDEV_TYPE=device -- setup --subsysnqn s4 --subsys-uuid "$uuid" --hostnqn "$host"
expect_eq "setup, device without NVMET_BLKDEV: exit 1, no ctl call" "$rc:$log" "1:"
expect_match "setup, device without NVMET_BLKDEV says why" "$err" "*NVMET_BLKDEV*"

key=DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:
run -- setup --subsysnqn s5 --subsys-uuid "$uuid" --hostnqn "$host" --hostkey "$key"
expect_eq "setup --hostkey sets the host's key before the namespace" "$rc:$log" "0:ctl remove subsystem s5
ctl add subsystem s5 -host $host
ctl set host s5 $host -dhchap-key $key
ctl add namespace s5 -nsid 1 -backend file -path $img/s5.img -size 1GiB -uuid $uuid"
for k in --ctrlkey --ctrkey; do
	run -- setup --subsysnqn s5 --subsys-uuid "$uuid" --hostnqn "$host" --hostkey "$key" "$k" "$key"
	expect_eq "setup --hostkey $k: both keys" "$rc:$log" "0:ctl remove subsystem s5
ctl add subsystem s5 -host $host
ctl set host s5 $host -dhchap-key $key -dhchap-ctrl-key $key
ctl add namespace s5 -nsid 1 -backend file -path $img/s5.img -size 1GiB -uuid $uuid"
	run -- setup --subsysnqn s5 --subsys-uuid "$uuid" --hostnqn "$host" "$k" "$key"
	expect_eq "setup $k without --hostkey: exit 1, no ctl call" "$rc:$log" "1:"
	expect_match "setup $k without --hostkey says why" "$err" "*needs --hostkey*"
done
run STUB_REFUSE="set host" STUB_REFUSE_MSG="subsystems[0].hosts[0].dhchap_key: CRC mismatch" -- \
	setup --subsysnqn s5 --subsys-uuid "$uuid" --hostnqn "$host" --hostkey "$key"
expect_eq "setup with refused keys rolls back" "$rc:$log" "1:ctl remove subsystem s5
ctl add subsystem s5 -host $host
ctl set host s5 $host -dhchap-key $key
ctl remove subsystem s5"
run -- setup --subsysnqn s6 --subsys-uuid "$uuid" --hostnqn "$host" --hostkey ""
expect_eq "setup with an empty --hostkey proceeds" "$rc" 0

run STUB_REFUSE="add namespace" STUB_REFUSE_MSG="subsystems[0].namespaces[0].uuid: bad" -- \
	setup --subsysnqn s7 --subsys-uuid bad --hostnqn "$host"
expect_eq "setup with a refused namespace rolls back" "$rc:$log" "1:ctl remove subsystem s7
ctl add subsystem s7 -host $host
ctl add namespace s7 -nsid 1 -backend file -path $img/s7.img -size 1GiB -uuid bad
ctl remove subsystem s7"
expect_match "setup passes on the daemon's refusal" "$err" "*namespaces[[]0[]].uuid: bad*"

run STUB_REFUSE="add subsystem" -- setup --subsysnqn s8 --subsys-uuid "$uuid" --hostnqn "$host"
expect_eq "setup with a refused subsystem" "$rc:$log" "1:ctl remove subsystem s8
ctl add subsystem s8 -host $host"

run STUB_LIST= STUB_REFUSE="remove subsystem" STUB_REFUSE_MSG="no daemon answers at /x" -- \
	setup --subsysnqn s9 --subsys-uuid "$uuid" --hostnqn "$host"
expect_eq "setup with the daemon down stops at once" "$rc:$log" "1:ctl remove subsystem s9"

run -- setup --subsysnqn a/b --subsys-uuid "$uuid" --hostnqn "$host"
expect_eq "setup, file, refuses an NQN with a slash" "$rc:$log" "1:"

echo "== cleanup"
touch "$img/c1.img"
run STUB_EXISTING=c1 -- cleanup --subsysnqn c1
expect_eq "cleanup" "$rc:$log" "0:ctl remove subsystem c1"
[[ ! -e $img/c1.img ]] || fail "cleanup left the image file"
checks=$((checks + 1))

touch "$img/c2.img"
run -- cleanup --subsysnqn=c2
expect_eq "cleanup of a missing subsystem succeeds" "$rc:$log" "0:ctl remove subsystem c2"
[[ ! -e $img/c2.img ]] || fail "cleanup of a missing subsystem left the image file"
checks=$((checks + 1))

touch "$img/c3.img"
run STUB_REFUSE="remove subsystem" STUB_REFUSE_MSG="permission denied" -- cleanup --subsysnqn c3
expect_eq "cleanup refused fails" "$rc:$log" "1:ctl remove subsystem c3"
expect_match "cleanup refused says why" "$err" "*permission denied*"
[[ -e $img/c3.img ]] || fail "a refused cleanup deleted the image file"
checks=$((checks + 1))

echo "== nvmet-cfs shim"
run -- setup --subsysnqn s5 --subsys-uuid "$uuid" --hostnqn "$host" --hostkey "$key"
expect_eq "setup without the shim sets the keys itself" "$rc:$log" "0:ctl remove subsystem s5
ctl add subsystem s5 -host $host
ctl set host s5 $host -dhchap-key $key
ctl add namespace s5 -nsid 1 -backend file -path $img/s5.img -size 1GiB -uuid $uuid"
expect_match "setup without the shim says so" "$err" "nvme-target-control: no $tmp/no-nvmet-cfs found: *"
expect_eq "in one line" "$(wc -l <<<"$err")" 1

# The shim mounts FUSE: that takes root and /dev/fuse, and the shim built
# (NVMET_CFS_BIN, else go build). Where that cannot be, the checks are not
# run, unless NVMEOF_REQUIRE_TOOLS (test/run-tests.sh) asks for them.
shim=${NVMET_CFS_BIN:-}
why=""
if [[ ! -e /dev/fuse ]]; then
	why="no /dev/fuse"
elif ((EUID != 0)); then
	why="mounting FUSE needs root"
elif [[ -z $shim ]]; then
	shim=$tmp/nvmet-cfs
	(cd "$here/../.." && go build -o "$shim" ./test/blktests/nvmet-cfs) || why="cannot build the shim"
fi
# The shim's namespace, ANA and state calls go to the admin socket: a fake
# daemon answers there from the stub's state file (nvmet-cfs/fakedaemon).
fake=${NVMET_CFS_FAKE_BIN:-}
if [[ -z $why && -z $fake ]]; then
	fake=$tmp/fakedaemon
	(cd "$here/../.." && go build -o "$fake" ./test/blktests/nvmet-cfs/fakedaemon/cmd) || why="cannot build the fake daemon"
fi
# mounted: how many shims serve $tmp/nvmet.
mounted() {
	awk -v d="$(realpath "$tmp/nvmet")" '$2 == d && $3 == "fuse.nvmet-cfs"' /proc/self/mounts | wc -l
}
if [[ -n $why ]]; then
	if [[ -n ${NVMEOF_REQUIRE_TOOLS:-} ]]; then
		fail "the shim's checks cannot run: $why"
	else
		echo "NOT RUN: the shim's checks: $why; test/run-tests.sh requires them"
	fi
else
	mkdir "$tmp/nvmet"
	echo '{"generation":1,"ports":[{"id":1,"address":"10.0.0.1","port":4420}],"subsystems":[]}' >"$tmp/state.json"
	mkfifo "$tmp/fake.ready"
	"$fake" "$tmp/ctl.sock" "$tmp/state.json" "$tmp/log" >"$tmp/fake.ready" &
	fakepid=$!
	trap 'kill $fakepid 2>/dev/null; umount "$tmp/nvmet" 2>/dev/null || true; rm -rf "$tmp"' EXIT
	read -r -t 30 line <"$tmp/fake.ready" || true
	[[ ${line:-} == ready ]] || fail "the fake daemon did not start"
	key2=DHHC-1:00:Jc/My1o0qtLCWRp+sHhAVafdfaS7YQOMYhk9zSmlatobqB8C:
	hostdir=$tmp/nvmet/hosts/$host
	shimrun() { run NVMET_CFS_SHIM="$shim" STUB_STATE="$tmp/state.json" NVMEOF_TGT_SOCKET="$tmp/ctl.sock" "$@"; }
	shimrun -- setup --subsysnqn c1 --subsys-uuid "$uuid" --hostnqn "$host" --hostkey "$key" --ctrlkey "$key2"
	expect_eq "setup mounts the shim and writes the keys through it" "$rc:$log" "0:ctl remove subsystem c1
ctl add subsystem c1 -host $host
ctl list -json
ctl set host c1 $host -dhchap-key $key
ctl list -json
ctl set host c1 $host -dhchap-key $key -dhchap-ctrl-key $key2
ctl add namespace c1 -nsid 1 -backend file -path $img/c1.img -size 1GiB -uuid $uuid"
	expect_eq "setup with the shim prints nothing" "$err" ""
	expect_eq "the shim is mounted once" "$(mounted)" 1
	expect_eq "the host's key reads back" "$(cat "$hostdir/dhchap_key" 2>&1)" "$key"
	pid=$(sed -n 's/.*serving .* (pid \([0-9]*\))$/\1/p' "$tmp/cfs.log" | tail -n1)

	# What blktests' _set_nvmet_dhgroup does, then a value nvmet refuses,
	# then one the daemon refuses.
	: >"$tmp/log"
	wrc=0
	echo ffdhe2048 >"$hostdir/dhchap_dhgroup" || wrc=$?
	expect_eq "a DH group write reaches the daemon, with the keys" "$wrc:$(cat "$tmp/log")" "0:ctl list -json
ctl set host c1 $host -dhchap-key $key -dhchap-ctrl-key $key2 -dhchap-dhgroups ffdhe2048"
	: >"$tmp/log"
	wrc=0
	echo -n "hmac(md5)" 2>/dev/null >"$hostdir/dhchap_hash" || wrc=$?
	expect_eq "a hash nvmet does not know fails the write, no ctl call" "$wrc:$(cat "$tmp/log")" "1:"
	echo "set host" >"$tmp/log.refuse"
	wrc=0
	echo -n "$key2" 2>/dev/null >"$hostdir/dhchap_key" || wrc=$?
	rm "$tmp/log.refuse"
	expect_eq "a key the daemon refuses fails the write" "$wrc" 1
	expect_eq "a refused key is not kept" "$(cat "$hostdir/dhchap_key")" "$key"

	# The namespace setup made, as nvme/051, 054 and 058 write it.
	ns=$tmp/nvmet/subsystems/c1/namespaces
	expect_eq "setup's namespace reads as the daemon has it" \
		"$(cat "$ns/1/enable" "$ns/1/device_path" "$ns/1/device_uuid" "$ns/1/ana_grpid" "$ns/1/resv_enable" 2>&1)" \
		"1"$'\n'"$img/c1.img"$'\n'"$uuid"$'\n'"1"$'\n'"0"
	# wcall WHAT FILE VALUE WANT_RC WANT_CALLS: writes VALUE to FILE
	# through the shim and checks what reached the daemon.
	wcall() {
		: >"$tmp/log"
		local wrc=0
		echo "$3" 2>/dev/null >"$2" || wrc=$?
		expect_eq "$1" "$wrc:$(grep -v '^ctl list -json$' "$tmp/log")" "$4:$5"
	}
	wcall "disable: remove_namespace" "$ns/1/enable" 0 0 'remove_namespace {"nqn":"c1","nsid":1}'
	wcall "enable: add_namespace as it was" "$ns/1/enable" 1 0 \
		"add_namespace {\"nqn\":\"c1\",\"nsid\":1,\"backend\":\"file\",\"path\":\"$img/c1.img\",\"block_size\":512,\"uuid\":\"$uuid\"}"
	wcall "a device_path write on an enabled namespace fails" "$ns/1/device_path" "$img/x" 1 ""
	mkdir "$ns/2" || fail "mkdir namespaces/2"
	: >"$img/c1-2.img"
	wcall "device_path" "$ns/2/device_path" "$img/c1-2.img" 0 ""
	wcall "device_uuid" "$ns/2/device_uuid" 11111111-2222-3333-4444-555555555555 0 ""
	wcall "a bad device_uuid fails" "$ns/2/device_uuid" 1111 1 ""
	wcall "ana_grpid" "$ns/2/ana_grpid" 2 0 ""
	wcall "resv_enable" "$ns/2/resv_enable" 1 0 ""
	wcall "enable: add_namespace with what was written" "$ns/2/enable" 1 0 \
		"add_namespace {\"nqn\":\"c1\",\"nsid\":2,\"backend\":\"file\",\"path\":\"$img/c1-2.img\",\"uuid\":\"11111111-2222-3333-4444-555555555555\",\"ana_group\":2,\"reservations\":true}"
	wcall "ana_grpid of an enabled namespace: set_namespace" "$ns/2/ana_grpid" 3 0 'set_namespace {"ana_group":3,"nqn":"c1","nsid":2}'
	: >"$tmp/log"
	rmdir "$ns/2" || fail "rmdir namespaces/2"
	expect_eq "rmdir disables" "$(cat "$tmp/log")" 'remove_namespace {"nqn":"c1","nsid":2}'
	# The port, as nvme/057 and 058 read and write it.
	port=$tmp/nvmet/ports/1
	expect_eq "the daemon's port, as configfs shows it" \
		"$(cat "$port/addr_trtype" "$port/addr_traddr" "$port/addr_trsvcid" 2>&1):$(ls "$port/subsystems" 2>&1)" \
		"rdma"$'\n'"10.0.0.1"$'\n'"4420:c1"
	wcall "ana_state: set_ana_state" "$port/ana_groups/1/ana_state" non-optimized 0 'set_ana_state {"group":1,"port":1,"state":"non_optimized"}'
	expect_eq "ana_state reads back in nvmet's spelling" "$(cat "$port/ana_groups/1/ana_state")" non-optimized
	wcall "an ana_state nvmet does not know fails" "$port/ana_groups/1/ana_state" non_optimized 1 ""
	: >"$tmp/log"
	mkdir "$port/ana_groups/2" || fail "mkdir ana_groups/2"
	expect_eq "a new ANA group is inaccessible, as in nvmet" "$(cat "$tmp/log")" 'set_ana_state {"group":2,"port":1,"state":"inaccessible"}'
	wcall "the new group's ana_state" "$port/ana_groups/2/ana_state" optimized 0 'set_ana_state {"group":2,"port":1,"state":"optimized"}'

	shimrun -- setup --subsysnqn c2 --subsys-uuid "$uuid" --hostnqn "$host"
	expect_eq "a second setup takes the live shim and the host as they are" "$rc:$log" "0:ctl remove subsystem c2
ctl add subsystem c2 -host $host
ctl add namespace c2 -nsid 1 -backend file -path $img/c2.img -size 1GiB -uuid $uuid"
	expect_eq "the shim is still mounted once" "$(mounted)" 1
	shimrun -- cleanup --subsysnqn c2
	expect_eq "cleanup keeps a host another subsystem allows" "$rc:$log:$(mounted)" "0:ctl remove subsystem c2
ctl list -json:1"
	[[ -d $hostdir ]] || fail "cleanup removed a host c1 still allows"
	checks=$((checks + 1))
	shimrun -- cleanup --subsysnqn c1
	expect_eq "cleanup of the last subsystem unmounts the shim" "$rc:$log:$(mounted)" "0:ctl remove subsystem c1
ctl list -json:0"
	expect_eq "cleanup prints nothing" "$err" ""
	checks=$((checks + 1))
	if [[ -z $pid ]]; then
		fail "the shim's log names no pid"
	elif ! timeout 10 tail --pid="$pid" -f /dev/null; then
		fail "the shim (pid $pid) still runs after its unmount"
	fi

	echo "set host" >"$tmp/log.refuse"
	shimrun -- setup --subsysnqn c3 --subsys-uuid "$uuid" --hostnqn "$host" --hostkey "$key"
	rm "$tmp/log.refuse"
	expect_eq "setup with keys the daemon refuses rolls back and unmounts" "$rc:$log:$(mounted)" "1:ctl remove subsystem c3
ctl add subsystem c3 -host $host
ctl list -json
ctl set host c3 $host -dhchap-key $key
ctl remove subsystem c3
ctl list -json:0"

	shimrun NVMET_CFS_SHIM=false -- setup --subsysnqn c4 --subsys-uuid "$uuid" --hostnqn "$host"
	expect_eq "setup whose shim dies before mounting fails before adding anything" "$rc:$log:$(mounted)" "1:ctl remove subsystem c4:0"
	expect_match "setup whose shim dies says where its log is" "$err" "*cannot mount*$tmp/cfs.log*"
fi

if ((failures)); then
	echo "$failures of $checks checks failed" >&2
	exit 1
fi
echo "all $checks checks passed"
