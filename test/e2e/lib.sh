# Shared helpers of the end-to-end scenarios. Sourced inside the guest,
# where NVMEOF_TGT is the daemon under test and RESULTS the results share.
#
# TARGET picks what serves the scenarios: nvmeof-tgt (the default, our
# daemon) or kernel (Linux nvmet-rdma set up from the same YAML file, to
# check the suite itself against a known-good target).
set -euo pipefail

ADDR=10.99.0.1
PORT=4420
TARGET=${TARGET:-nvmeof-tgt}
TARGET_PID=""
KERNEL_TARGET_UP=""
case $TARGET in
nvmeof-tgt) ;;
kernel) source "$E2E_DIR/../vm/kernel-target.sh" ;;
*) echo "unknown TARGET '$TARGET' (nvmeof-tgt or kernel)" >&2; exit 1 ;;
esac

# ours: true when the daemon under test is nvmeof-tgt, for checks of
# behaviour the kernel target does not share.
ours() { [ "$TARGET" = nvmeof-tgt ]; }

# daemon_only REASON: end a scenario that only makes sense against
# nvmeof-tgt; under TARGET=kernel it is reported as skipped, not passed.
daemon_only() {
	ours && return 0
	echo "skipped against the kernel target: $*"
	echo "$*" >"$RESULTS/$SCENARIO.skip"
	exit 0
}

fail() {
	echo "FAIL: $*" >&2
	echo "--- kernel log (last 25 lines)" >&2
	dmesg | tail -25 >&2
	exit 1
}

# poll SECONDS CMD...: run CMD every 0.1 s until it succeeds (status 0),
# or until SECONDS have passed (status 1). The pause only spaces out the
# checks; the condition, not the time, decides.
poll() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.1
	done
}

# wait_for SECONDS WHAT CMD...: poll CMD; fail saying WHAT did not happen
# when SECONDS pass first.
wait_for() {
	local secs=$1 what=$2
	shift 2
	poll "$secs" "$@" || fail "$what: not within $secs s"
}

# ctrl_state_is CTRL REGEX: the host controller's state matches REGEX
# ("gone" once it is deleted).
ctrl_state_is() {
	local s
	s=$(cat "/sys/class/nvme/$1/state" 2>/dev/null) || s=gone
	[[ $s =~ $2 ]]
}

assert_eq() { # what got want
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
	echo "ok: $1 = $3"
}

# start_target CONFIG [LOG]: run the daemon in the background and wait until
# it answers discovery.
start_target() {
	local config=$1 log=${2:-$RESULTS/$SCENARIO-target.log}
	if ours; then
		"$NVMEOF_TGT" -config "$config" >>"$log" 2>&1 &
		TARGET_PID=$!
	else
		kt_load >>"$log" 2>&1 || fail "loading the kernel target modules: $(tail -5 "$log")"
		KERNEL_TARGET_UP=1
		kt_from_config "$config" >>"$log" 2>&1 || fail "configuring the kernel target: $(tail -5 "$log")"
	fi
	wait_for 30 "target answering discovery" target_answers "$log"
	echo "target up (${TARGET_PID:+pid $TARGET_PID}${KERNEL_TARGET_UP:+kernel nvmet})"
}

# target_answers LOG: discovery works; fails the scenario at once if our
# daemon has exited instead.
target_answers() {
	nvme discover -t rdma -a "$ADDR" -s "$PORT" >/dev/null 2>&1 && return 0
	if ours && ! kill -0 "$TARGET_PID" 2>/dev/null; then
		fail "target exited at start: $(tail -5 "$1")"
	fi
	return 1
}

# stop_target: SIGTERM, which must end the daemon with status 0 within 10 s.
stop_target() {
	if ! ours; then
		# The kernel target's counterpart: tear the configuration down.
		[ -n "$KERNEL_TARGET_UP" ] || return 0
		KERNEL_TARGET_UP=""
		kt_clear || fail "tearing the kernel target down"
		echo "kernel target removed"
		return 0
	fi
	local pid=$TARGET_PID
	[ -n "$pid" ] || return 0
	TARGET_PID=""
	kill -TERM "$pid"
	local start=$SECONDS
	if ! poll 10 gone "$pid"; then
		kill -9 "$pid"
		fail "target still running 10 s after SIGTERM"
	fi
	local rc=0
	wait "$pid" || rc=$?
	assert_eq "target exit status after SIGTERM" "$rc" 0
	echo "target stopped in $((SECONDS - start)) s"
}

# gone PID: the process has exited.
gone() { ! kill -0 "$1" 2>/dev/null; }

# connect NQN [extra nvme-cli args]: connect and print the namespace's
# block device once it appears.
connect() {
	local nqn=$1
	shift
	nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$nqn" "$@" >&2 || fail "nvme connect $nqn"
	wait_dev "$nqn"
}

# ctrl_of NQN: the controller device (nvmeN) connected to NQN.
ctrl_of() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c/subsysnqn" ] || continue
		if [ "$(cat "$c/subsysnqn")" = "$1" ] && [ "$(cat "$c/state")" = live ]; then
			basename "$c"
			return 0
		fi
	done
	return 1
}

# wait_dev NQN [NSID]: print /dev/nvmeXnY of the namespace, waiting for it.
# With native multipath (the Debian default) the block device hangs off the
# NVMe subsystem, not the controller; without it, off the controller.
wait_dev() {
	poll 10 ns_dev "$1" "${2:-1}" || fail "no block device for $1 namespace ${2:-1}"
}

# ns_dev NQN NSID: print /dev/nvmeXnY of the namespace if the host has it.
# By NSID: the kernel may give a new namespace an old one's name.
ns_dev() {
	local s d
	for s in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ -e "$s/subsysnqn" ] && [ "$(cat "$s/subsysnqn")" = "$1" ] || continue
		for d in "$s"/nvme*n*; do
			[ -e "$d/nsid" ] && [ "$(cat "$d/nsid")" = "$2" ] || continue
			if [ -b "/dev/$(basename "$d")" ]; then
				echo "/dev/$(basename "$d")"
				return 0
			fi
		done
	done
	return 1
}

# wait_ns_gone NQN NSID: wait until the host dropped the namespace's block
# device.
wait_ns_gone() {
	wait_for 10 "namespace $2 of $1 leaving the host" ns_absent "$1" "$2"
}

# ns_absent NQN NSID: the host has no namespace NSID of NQN, block device
# or not.
ns_absent() {
	local s d
	for s in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ -e "$s/subsysnqn" ] && [ "$(cat "$s/subsysnqn")" = "$1" ] || continue
		for d in "$s"/nvme*n*; do
			[ -e "$d/nsid" ] && [ "$(cat "$d/nsid")" = "$2" ] && return 1
		done
	done
	return 0
}

disconnect() {
	nvme disconnect -n "$1" >&2 || fail "nvme disconnect $1"
}

# cleanup: leave nothing connected or running for the next scenario.
cleanup() {
	nvme disconnect-all >/dev/null 2>&1 || true
	if [ -n "$TARGET_PID" ]; then
		kill -9 "$TARGET_PID" 2>/dev/null || true
		wait "$TARGET_PID" 2>/dev/null || true
	fi
	if [ -n "$KERNEL_TARGET_UP" ]; then
		kt_clear >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

# fio_ok NAME ARGS...: run fio with JSON output; fail on any error, print
# the bytes moved.
fio_ok() {
	local name=$1
	shift
	local out=$RESULTS/$SCENARIO-$name.json
	fio --name="$name" --output-format=json --output="$out" "$@" || fail "fio $name exited with $?: $(tail -20 "$out")"
	local errs rd wr
	errs=$(jq '[.jobs[].error] | add' "$out")
	rd=$(jq '[.jobs[].read.io_bytes] | add' "$out")
	wr=$(jq '[.jobs[].write.io_bytes] | add' "$out")
	assert_eq "fio $name errors" "$errs" 0
	echo "fio $name: read $rd bytes, wrote $wr bytes"
	FIO_READ=$rd
	FIO_WRITTEN=$wr
}

# metric NAME [LABEL-FILTER]: the value of the first series of NAME on the
# daemon's /metrics (metrics.address 127.0.0.1:9750), optionally the first
# whose labels contain LABEL-FILTER.
metric() {
	# Whole scrape first: awk stopping early must not break curl's pipe.
	curl -fsS -o /tmp/metrics.txt http://127.0.0.1:9750/metrics || fail "scraping /metrics"
	awk -v m="$1" -v f="${2:-}" '$1 ~ "^"m"[{]" || $1 == m { if (f == "" || index($1, f)) { print $2; exit } }' /tmp/metrics.txt
}

# config FILE: write a daemon configuration from stdin.
config() { cat >"$1"; }

# serve_file NQN PATH SIZE: start the target with one subsystem whose
# namespace 1 is a file.
serve_file() {
	config /tmp/tgt.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $1
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: $2, size: $3}]
CFG
	start_target /tmp/tgt.yaml
}

# ceph_up: the guest's Ceph cluster (test/ceph/cluster.sh: one monitor, one
# BlueStore OSD, pool rbd of size 1, cephx on) on the third disk. The first
# rbd scenario starts it; it runs on for the rest of the boot, so later
# ones only read its env file (CEPH_CONF, CEPH_USER, CEPH_KEYRING, ...).
CEPH_DIR=/ceph/cluster
ceph_up() {
	if [ ! -f "$CEPH_DIR/env" ]; then
		[ -b /dev/vdc ] || fail "no /dev/vdc for the Ceph cluster (test/e2e/e2e_test.go makes it)"
		# The OSD puts the host name in its CRUSH location; BlueStore
		# needs O_DIRECT, which the guest's tmpfs lacks.
		hostname ceph0
		mkfs.ext4 -q -F /dev/vdc
		mkdir -p /ceph
		mount /dev/vdc /ceph
		local start=$SECONDS
		CEPH_OSD_SIZE=$((2 << 30)) "$E2E_DIR/../ceph/cluster.sh" start "$CEPH_DIR" >"$RESULTS/ceph-start.log" 2>&1 ||
			fail "starting the Ceph cluster: $(tail -20 "$RESULTS/ceph-start.log")"
		echo "ceph cluster started in $((SECONDS - start)) s"
	else
		# A scenario that failed with the OSD stopped must not fail the next.
		"$E2E_DIR/../ceph/cluster.sh" start-osd "$CEPH_DIR" >>"$RESULTS/ceph-start.log" 2>&1 ||
			fail "starting the OSD again: $(tail -5 "$RESULTS/ceph-start.log")"
	fi
	set -a
	source "$CEPH_DIR/env"
	set +a
}

# rbd_admin ARGS...: the rbd command as the cluster's administrator.
# The rbd command waits for the OSDs without a limit of its own.
rbd_admin() { timeout 120 rbd --conf "$CEPH_CONF" --id admin --keyring "$CEPH_ADMIN_KEYRING" "$@"; }

# serve_rbd NQN IMAGE SIZE: start the target with one subsystem whose
# namespace 1 is the RBD image IMAGE (created with SIZE), reached as the
# cluster's RBD user.
serve_rbd() {
	config /tmp/tgt.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}]
metrics: {address: 127.0.0.1:9750}
ceph: {conf: $CEPH_CONF, user: $CEPH_USER, keyring: $CEPH_KEYRING}
subsystems:
  - nqn: $1
    allow_any_host: true
    namespaces: [{nsid: 1, backend: rbd, pool: $CEPH_POOL, image: $2, create: true, size: $3}]
CFG
	start_target /tmp/tgt.yaml
}
