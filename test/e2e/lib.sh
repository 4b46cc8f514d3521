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
# A second daemon (B) beside the one under test (A), for multipath: its own
# address on the same rxe netdev (addr2_up), admin socket, metrics address
# and state file, which its configuration names (b_settings).
ADDR2=10.99.0.2
TARGET2_PID=""
B_SOCKET=/run/nvmeof-tgt/b.sock
B_METRICS=127.0.0.1:9751
B_STATE=/run/nvmeof-tgt/b-state.json
ADDR2_ADDED=""
SHARED_DM=()
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

# The guest is emulated, and each process started costs it milliseconds
# of CPU the daemon and the host need: the helpers the scenarios poll
# with read sysfs with val and pause with nap, neither of which starts
# one.

# val FILE: REPLY set to FILE's first line; fails when FILE cannot be read.
val() {
	REPLY=""
	read -r REPLY 2>/dev/null <"$1" || [ -n "$REPLY" ]
}

# nap SECONDS: sleep, as a read that times out on a pipe nothing writes to.
exec {NAP_FD}<> <(:)
nap() { read -rt "$1" -u "$NAP_FD" || true; }

# poll SECONDS CMD...: run CMD until it succeeds (status 0), or until
# SECONDS have passed (status 1). The pause only spaces out the checks;
# the condition, not the time, decides. It is 0.1 s, or as long as the
# check took, whichever is longer: a check that costs (a daemon's metrics,
# a discovery) takes at most half of the emulated guest's time, which the
# daemons under test need.
poll() {
	local deadline=$((SECONDS + $1)) t0 us pause
	shift
	while t0=${EPOCHREALTIME/./} && ! "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		us=$((${EPOCHREALTIME/./} - t0))
		[ "$us" -gt 100000 ] || us=100000
		printf -v pause '%d.%06d' $((us / 1000000)) $((us % 1000000))
		nap "$pause"
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
	val "/sys/class/nvme/$1/state" || REPLY=gone
	[[ $REPLY =~ $2 ]]
}

assert_eq() { # what got want
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
	echo "ok: $1 = $3"
}

# start_target CONFIG [LOG]: run the daemon in the background and wait until
# it answers discovery.
start_target() {
	local config=$1 log=${2:-$RESULTS/$SCENARIO-target.log}
	local from=""
	if ours; then
		log_end "$log"
		from=$LOG_END
		"$NVMEOF_TGT" -config "$config" >>"$log" 2>&1 &
		TARGET_PID=$!
	else
		kt_load >>"$log" 2>&1 || fail "loading the kernel target modules: $(tail -5 "$log")"
		KERNEL_TARGET_UP=1
		kt_from_config "$config" >>"$log" 2>&1 || fail "configuring the kernel target: $(tail -5 "$log")"
	fi
	wait_for 30 "target answering discovery" target_answers "$log" "$ADDR" "$TARGET_PID" "$from"
	echo "target up (${TARGET_PID:+pid $TARGET_PID}${KERNEL_TARGET_UP:+kernel nvmet})"
}

# target_answers LOG [ADDR [PID [FROM]]]: discovery works; fails the
# scenario at once if our daemon has exited instead. With FROM (LOG's
# length before the daemon started, log_end), discovery is tried only
# once LOG has the daemon's "nvmeof-tgt serving" after FROM (at level
# info, which the scenarios keep): a discovery is a process and an RDMA
# connection, a second of the emulated guest's time that a daemon still
# opening its namespaces needs.
target_answers() {
	local addr=${2:-$ADDR} pid=${3:-$TARGET_PID}
	if [ -n "${4:-}" ]; then
		local LC_ALL=C
		log_text "$1"
		if [[ ${LOG_TEXT:$4} != *"nvmeof-tgt serving"* ]]; then
			kill -0 "$pid" 2>/dev/null || fail "target at $addr exited at start: $(tail -5 "$1")"
			return 1
		fi
	fi
	nvme discover -t rdma -a "$addr" -s "$PORT" >/dev/null 2>&1 && return 0
	if ours && ! kill -0 "$pid" 2>/dev/null; then
		fail "target at $addr exited at start: $(tail -5 "$1")"
	fi
	return 1
}

# log_text FILE: LOG_TEXT is FILE's text, empty while it is missing (the
# daemon's shell may not have made it yet); bash alone, bytes not
# characters, so that offsets into it are lengths of the file.
log_text() {
	local LC_ALL=C
	LOG_TEXT=""
	[ ! -f "$1" ] || IFS= read -r -d '' LOG_TEXT <"$1" || true
}
# log_end FILE: LOG_END is FILE's length in bytes (0 while it is missing).
log_end() {
	local LC_ALL=C
	log_text "$1"
	LOG_END=${#LOG_TEXT}
}

# addr2_up: give the rxe netdev the second address and wait until rxe has
# its GID, so that RDMA CM can listen and connect on it.
addr2_up() {
	if [[ $(ip -4 -o addr show dev eth0) != *" $ADDR2/"* ]]; then
		ip addr add "$ADDR2/24" dev eth0 || fail "adding $ADDR2 to eth0"
		ADDR2_ADDED=1
	fi
	wait_for 10 "an rxe GID for $ADDR2" rxe_has_gid "$ADDR2"
}

# rxe_has_gid IPV4: some RDMA port's GID table holds the address (as an
# IPv4-mapped GID).
rxe_has_gid() {
	local want
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${1//./ })
	# One grep over the whole table: a process per entry takes seconds here.
	grep -qsx "$want" /sys/class/infiniband/*/ports/*/gids/*
}

# b_settings: the top-level YAML keys that keep daemon B off A's admin
# socket, metrics address and state file; put it in B's configuration.
b_settings() {
	cat <<YAML
control: {socket: $B_SOCKET}
metrics: {address: $B_METRICS}
state_file: $B_STATE
YAML
}

# start_target2 CONFIG [LOG]: run daemon B (configured with b_settings and
# a port on ADDR2) and wait until it answers discovery there.
start_target2() {
	local config=$1 log=${2:-$RESULTS/$SCENARIO-target2.log}
	ours || fail "start_target2: a second daemon is nvmeof-tgt only"
	[ -z "$TARGET2_PID" ] || fail "start_target2: daemon B already runs (pid $TARGET2_PID)"
	log_end "$log"
	"$NVMEOF_TGT" -config "$config" >>"$log" 2>&1 &
	TARGET2_PID=$!
	wait_for 30 "daemon B answering discovery on $ADDR2" target_answers "$log" "$ADDR2" "$TARGET2_PID" "$LOG_END"
	echo "daemon B up (pid $TARGET2_PID)"
}

# stop_target2: SIGTERM daemon B, which must exit 0 within 10 s.
stop_target2() {
	local pid=$TARGET2_PID rc=0
	[ -n "$pid" ] || return 0
	TARGET2_PID=""
	kill -TERM "$pid"
	if ! poll 10 gone "$pid"; then
		kill -9 "$pid"
		fail "daemon B still running 10 s after SIGTERM"
	fi
	wait "$pid" || rc=$?
	assert_eq "daemon B exit status after SIGTERM" "$rc" 0
}

# kill9_target / kill9_target2: kill -9 daemon A / B and reap it.
kill9_target() {
	[ -n "$TARGET_PID" ] || fail "kill9_target: daemon A is not running"
	kill -9 "$TARGET_PID"
	wait "$TARGET_PID" 2>/dev/null || true
	TARGET_PID=""
}
kill9_target2() {
	[ -n "$TARGET2_PID" ] || fail "kill9_target2: daemon B is not running"
	kill -9 "$TARGET2_PID"
	wait "$TARGET2_PID" 2>/dev/null || true
	TARGET2_PID=""
}

# writer_under_way DEV LINES SECONDS: start the test/durability writer on
# DEV (RWF_DSYNC, 1024 blocks, 300 batches of depth 8) in the background,
# WRITER its pid and REC its record, and wait until the record has LINES
# lines (it grows per batch): the writer is well under way.
writer_under_way() {
	REC=$RESULTS/$SCENARIO.record
	"$DURABILITY" write -dev "$1" -record "$REC" -durable dsync -blocks 1024 -batches 300 -depth 8 &
	WRITER=$!
	wait_for "$3" "$2 record lines from the writer" writer_has "$2"
}
writer_has() {
	gone "$WRITER" && fail "the writer ended before the kill: $(tail -3 "$REC")"
	[ -s "$REC" ] && [ "$(wc -l <"$REC")" -ge "$1" ]
}

# writer_went_on AT: the writer of writer_under_way ends without an error,
# past record line AT.
writer_went_on() {
	local rc=0 lines
	wait "$WRITER" || rc=$?
	assert_eq "writer exit status (an I/O error reached the application?)" "$rc" 0
	lines=$(wc -l <"$REC")
	[ "$lines" -gt "$1" ] || fail "the writer made no progress after the restart ($lines record lines)"
	echo "ok: the writer went on from record line $1 to $lines"
}

# ctl_b ARGS...: nvmeof-tgt ctl against daemon B's admin socket.
ctl_b() { "$NVMEOF_TGT" ctl -socket "$B_SOCKET" "$@"; }

# shared_disk NAME...: one dm-linear mapping per NAME over the whole of
# /dev/vdb, as /dev/mapper/NAME. The block backend opens its
# device exclusively, so two daemons serving one disk each get their own
# mapping of it; both see the same blocks.
shared_disk() {
	local name sectors
	[ -b /dev/vdb ] || fail "no second virtio disk (/dev/vdb) to share"
	modprobe dm-mod || fail "modprobe dm-mod"
	sectors=$(cat /sys/block/vdb/size)
	for name in "$@"; do
		# No udev in the guest: dmsetup makes the /dev/mapper nodes itself.
		DM_DISABLE_UDEV=1 dmsetup create "$name" --table "0 $sectors linear /dev/vdb 0" ||
			fail "dmsetup create $name"
		SHARED_DM+=("$name")
		[ -b "/dev/mapper/$name" ] || fail "dmsetup made no /dev/mapper/$name"
	done
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
		val "$c/subsysnqn" && [ "$REPLY" = "$1" ] || continue
		if val "$c/state" && [ "$REPLY" = live ]; then
			echo "${c##*/}"
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
		val "$s/subsysnqn" && [ "$REPLY" = "$1" ] || continue
		for d in "$s"/nvme*n*; do
			val "$d/nsid" && [ "$REPLY" = "$2" ] || continue
			if [ -b "/dev/${d##*/}" ]; then
				echo "/dev/${d##*/}"
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
		val "$s/subsysnqn" && [ "$REPLY" = "$1" ] || continue
		for d in "$s"/nvme*n*; do
			val "$d/nsid" && [ "$REPLY" = "$2" ] && return 1
		done
	done
	return 0
}

disconnect() {
	nvme disconnect -n "$1" >&2 || fail "nvme disconnect $1"
}

# cleanup: leave nothing connected or running for the next scenario.
cleanup() {
	local p d
	# A daemon blocked on a suspended device cannot die before it resumes.
	for d in "${SHARED_DM[@]}"; do
		DM_DISABLE_UDEV=1 dmsetup resume "$d" >/dev/null 2>&1 || true
	done
	nvme disconnect-all >/dev/null 2>&1 || true
	for p in "$TARGET_PID" "$TARGET2_PID"; do
		[ -n "$p" ] || continue
		kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [ -n "$KERNEL_TARGET_UP" ]; then
		kt_clear >/dev/null 2>&1 || true
	fi
	for d in "${SHARED_DM[@]}"; do
		DM_DISABLE_UDEV=1 dmsetup remove "$d" >/dev/null 2>&1 || true
	done
	if [ -n "$ADDR2_ADDED" ]; then
		ip addr del "$ADDR2/24" dev eth0 2>/dev/null || true
	fi
	if [ -n "${HELD_PORTS:-}" ]; then
		tc qdisc del dev lo root 2>/dev/null || true # hold_osd_traffic's
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
	fio_report "$name"
}

# fio_report NAME: NAME's fio report summed (fio_sums); fails on any
# error, prints the bytes moved.
fio_report() {
	fio_sums "$RESULTS/$SCENARIO-$1.json"
	assert_eq "fio $1 errors" "$FIO_ERRORS" 0
	echo "fio $1: read $FIO_READ bytes, wrote $FIO_WRITTEN bytes"
}

# fio_sums FILE: FIO_ERRORS, FIO_READ and FIO_WRITTEN, the jobs' error,
# read.io_bytes and write.io_bytes summed from fio's JSON output in FILE.
# Bash alone, where jq's start costs the emulated guest half a second: it
# fails unless it finds each of the three once for every job.
fio_sums() {
	local line in="" jobs=0 errors=0 reads=0 writes=0
	FIO_ERRORS=0 FIO_READ=0 FIO_WRITTEN=0
	while IFS= read -r line; do
		case $line in
		*'"jobname" : '*) jobs=$((jobs + 1)) ;;
		*'"error" : '*) errors=$((errors + 1)) FIO_ERRORS=$((FIO_ERRORS + ${line//[^0-9]/})) ;;
		*'"read" : {'*) in=read ;;
		*'"write" : {'*) in=write ;;
		*'"io_bytes" : '*)
			case $in in
			read) reads=$((reads + 1)) FIO_READ=$((FIO_READ + ${line//[^0-9]/})) ;;
			write) writes=$((writes + 1)) FIO_WRITTEN=$((FIO_WRITTEN + ${line//[^0-9]/})) ;;
			esac
			in=""
			;;
		*'{'*) in="" ;;
		esac
	done <"$1"
	[ "$jobs" -gt 0 ] && [ "$errors $reads $writes" = "$jobs $jobs $jobs" ] ||
		fail "fio's JSON in $1: $jobs jobs; error in $errors, read.io_bytes in $reads, write.io_bytes in $writes"
}

# fio_interrupt PID OUT: end the time-based fio run PID early with SIGINT,
# which fio takes as a clean end: it reports, and exits 0 or, for the
# signal, 128 (into FIO_STATUS). Its note on the signal comes ahead of the
# JSON report in OUT, which is left holding the report alone.
fio_interrupt() {
	FIO_STATUS=0
	kill -INT "$1"
	wait "$1" || FIO_STATUS=$?
	sed -n '/^{/,$p' "$2" >"$2.tmp" && mv "$2.tmp" "$2"
}

# fio_start NAME FIO-ARGS...: fio in the background for as long as a
# scenario's steps take (time based, up to 10 min), its JSON report in
# NAME's file; FIO_PID. fio_finish NAME: stops it, which must still have
# been running (it was to cover every step since fio_start), and checks
# its report: no errors, and bytes moved. A fixed run time would have
# the scenario wait for its end.
fio_start() {
	local name=$1
	shift
	fio --name="$name" --output-format=json --output="$RESULTS/$SCENARIO-$name.json" \
		--time_based --runtime=600 "$@" >"$RESULTS/$SCENARIO-$name.out" 2>&1 &
	FIO_PID=$!
}
fio_finish() {
	gone "$FIO_PID" && fail "fio $1 ended before the steps it was to cover: $(tail -5 "$RESULTS/$SCENARIO-$1.out")"
	fio_interrupt "$FIO_PID" "$RESULTS/$SCENARIO-$1.json"
	fio_report "$1"
	[ $((FIO_READ + FIO_WRITTEN)) -gt 0 ] || fail "fio $1 moved no data"
}

# fio_write_verify DEV MIB SEED: fio random writes of 4 KiB to 1 MiB at
# queue depth 16 over the first MIB MiB of DEV with crc32c verification,
# then a verify-only read pass, each of at least MIB MiB. FIO_VERIFY is the
# job's options, for another pass.
fio_write_verify() {
	FIO_VERIFY=(--filename="$1" --ioengine=libaio --direct=1 --iodepth=16 --bsrange=4k-1m --size="$2"m
		--verify=crc32c --verify_state_save=0 --randrepeat=1 --randseed="$3")
	fio_ok write --rw=randwrite --do_verify=0 "${FIO_VERIFY[@]}"
	[ "$FIO_WRITTEN" -ge $(($2 << 20)) ] || fail "fio wrote only $FIO_WRITTEN bytes"
	fio_ok verify --rw=randwrite --verify_only=1 "${FIO_VERIFY[@]}"
	[ "$FIO_READ" -ge $(($2 << 20)) ] || fail "verify pass read only $FIO_READ bytes"
}

# fs_write DEV: make an ext4 file system on DEV, write 20 MB of random
# bytes to file.bin in it and unmount it; prints the file's sha256sum.
fs_write() {
	local sum
	mkfs.ext4 -q -F "$1" || fail "mkfs.ext4 on $1"
	mkdir -p /mnt/e2e
	mount "$1" /mnt/e2e || fail "mounting $1"
	head -c 20000000 /dev/urandom >/mnt/e2e/file.bin || fail "writing file.bin on $1"
	sum=$(sha256sum </mnt/e2e/file.bin) || fail "reading file.bin on $1"
	umount /mnt/e2e || fail "unmounting $1"
	echo "$sum"
}

# fs_check DEV WHAT WANT: mount DEV again; file.bin's sha256sum (checked
# as WHAT) must be WANT, what fs_write printed.
fs_check() {
	mount "$1" /mnt/e2e || fail "mounting $1"
	assert_eq "$2" "$(sha256sum </mnt/e2e/file.bin)" "$3"
	umount /mnt/e2e || fail "unmounting $1"
}

# metric NAME [LABEL-FILTER]: the value of the first series of NAME on the
# daemon's /metrics (metrics.address 127.0.0.1:9750), optionally the first
# whose labels contain LABEL-FILTER.
metric() { metric_at 127.0.0.1:9750 "$@"; }

# metric_at HOST:PORT NAME [LABEL-FILTER]: metric, from the daemon whose
# metrics.address is HOST:PORT (daemon B's is $B_METRICS).
metric_at() {
	http_get "$1" /metrics /tmp/metrics.txt || fail "scraping $1/metrics"
	metric_in "$2" "${3:-}"
}

# metric_in NAME [LABEL-FILTER]: the value of NAME's first series in the
# last scrape (HTTP_BODY) whose labels contain LABEL-FILTER. A regular
# expression in bash, where awk's start costs the emulated guest 0.1 s,
# and metrics are read in polls.
metric_in() {
	local f=${2:-} esc="" c i re nl=$'\n'
	for ((i = 0; i < ${#f}; i++)); do
		c=${f:i:1}
		case $c in
		'.' | '[' | ']' | '\' | '(' | ')' | '*' | '+' | '?' | '{' | '}' | '|' | '^' | '$') esc+="\\$c" ;;
		*) esc+=$c ;;
		esac
	done
	if [ -z "$f" ]; then
		re="$nl$1(\\{[^}]*\\})? ([^$nl]*)"
	else
		re="$nl$1\\{[^}]*$esc[^}]*\\} ([^$nl]*)"
	fi
	[[ $nl$HTTP_BODY =~ $re ]] && echo "${BASH_REMATCH[-1]}"
	return 0
}

# http_get HOST:PORT PATH [FILE]: GET PATH over HTTP/1.0; the body in
# HTTP_BODY, and in FILE if given. Fails unless the status is 200. Bash's
# /dev/tcp, not curl: curl's start alone costs the emulated guest half a
# second, and metrics are read often, many times in a poll. The body is
# read with -N, in blocks: read line by line, bash takes a byte a system
# call (a 21 KB page: 39 ms on this machine against 2.5 ms). A stopped
# daemon's port still accepts: each read waits 10 s at most.
http_get() {
	local fd line rc=0
	HTTP_BODY=""
	exec {fd}<>"/dev/tcp/${1%:*}/${1##*:}" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&"$fd"
	IFS= read -r -t 10 line <&"$fd" || line="(no answer in 10 s)"
	if [[ $line != "HTTP/1."?" 200 "* ]]; then
		exec {fd}<&-
		echo "GET http://$1$2: ${line%$'\r'}" >&2
		return 1
	fi
	while IFS= read -r -t 10 line <&"$fd" && [ -n "${line%$'\r'}" ]; do :; done
	IFS= read -r -t 10 -d '' -N 67108864 HTTP_BODY <&"$fd" || rc=$? # 1: the end, as it should
	exec {fd}<&-
	[ "$rc" -le 1 ] || { echo "GET http://$1$2: no end of the body in 10 s" >&2; return 1; }
	[ -z "${3:-}" ] || printf '%s' "$HTTP_BODY" >"$3"
}

# jqs [--arg NAME VALUE]... JSON FILTER...: several jq filters over one
# JSON text with one jq (a start costs the emulated guest half a second
# or more): JQ[i] is filter i's output, a string as it is (jq -r),
# anything else as compact JSON, several outputs as their array, none as
# null.
jqs() {
	local args=() json f prog=""
	while [ "$1" = --arg ]; do
		args+=(--arg "$2" "$3")
		shift 3
	done
	json=$1
	shift
	for f in "$@"; do
		prog+="${prog:+, }([$f] | if length == 1 then .[0] elif length == 0 then null else . end | if type == \"string\" then . else tojson end)"
	done
	mapfile -t JQ < <(jq -r "${args[@]}" "$prog" <<<"$json")
	[ "${#JQ[@]}" = "$#" ] || fail "jq: ${#JQ[@]} lines for $# filters ($*)"
}

# config FILE: write a daemon configuration from stdin.
config() { cat >"$1"; }

# METRICS_ON is the top-level key that serves /metrics where metric reads.
METRICS_ON="metrics: {address: 127.0.0.1:9750}"

# RDMA_AND_TCP_PORTS is the ports key of the TCP scenarios: port 1 on RDMA,
# which answers start_target's discovery, and port 2 on NVMe/TCP.
RDMA_AND_TCP_PORTS="ports:
  - {id: 1, address: $ADDR, port: $PORT}
  - {id: 2, transport: tcp, address: $ADDR, port: 4420}"

# serve NQN NAMESPACES [TOP]: start the target with one port (SERVE_PORTS,
# if set, is the ports key instead) and one subsystem, NQN, open to any
# host, whose namespaces are NAMESPACES: a YAML flow list, or the lines of
# a block list after a newline. TOP is more top-level YAML, such as
# $METRICS_ON.
serve() {
	local ports="ports: [{id: 1, address: $ADDR, port: $PORT}]"
	[ -z "${SERVE_PORTS:-}" ] || ports=$SERVE_PORTS
	config /tmp/tgt.yaml <<CFG
${3:-}
$ports
subsystems:
  - nqn: $1
    allow_any_host: true
    namespaces: $2
CFG
	start_target /tmp/tgt.yaml
}

# serve_file NQN PATH SIZE: start the target with one subsystem whose
# namespace 1 is a file.
serve_file() { serve "$1" "[{nsid: 1, backend: file, path: $2, size: $3}]"; }

# ceph_up: the guest's Ceph cluster (ceph-start.sh: one monitor, one
# BlueStore OSD, pool rbd of size 1, cephx on) on the third disk.
# guest-run.sh starts it in the background a few scenarios before the
# first rbd scenario (or the scenario starts it here); it runs on for the
# rest of the boot, so later ones only read its env file (CEPH_CONF,
# CEPH_USER, CEPH_KEYRING, ...).
CEPH_DIR=/ceph/cluster
CEPH_ST=/run/e2e-ceph
# osd_alive: the cluster's OSD process runs (a zombie does not count).
osd_alive() {
	local _ state
	val "$CEPH_DIR/run/osd.0.pid" || return 1
	read -r _ _ state _ 2>/dev/null <"/proc/$REPLY/stat" || return 1
	[ "$state" != Z ]
}
# ceph_part cluster|apart: wait for that part of ceph-start.sh, begun in
# the background or, if nothing began it, here; fail if it failed.
ceph_part() {
	local t0=$SECONDS
	[ -e "$CEPH_ST/$1.begun" ] || "$E2E_DIR/ceph-start.sh" "$1" || true
	wait_for 400 "the Ceph cluster's start ($1)" test -f "$CEPH_ST/$1.rc"
	val "$CEPH_ST/$1.rc"
	[ "$REPLY" = 0 ] || fail "starting the Ceph cluster ($1): $(tail -20 "$RESULTS/ceph-start.log")"
	val "$CEPH_ST/$1.secs"
	echo "ceph $1 started in $REPLY s (this scenario waited $((SECONDS - t0)) s)"
}
ceph_up() {
	if [ ! -f "$CEPH_ST/cluster.rc" ]; then
		ceph_part cluster
	elif ! osd_alive; then
		# A scenario that failed with the OSD stopped must not fail the
		# next. (Asking the monitor whether a running OSD is up takes the
		# ceph tool, seconds of Python in the emulated guest.)
		"$E2E_DIR/../ceph/cluster.sh" start-osd "$CEPH_DIR" >>"$RESULTS/ceph-start.log" 2>&1 ||
			fail "starting the OSD again: $(tail -5 "$RESULTS/ceph-start.log")"
	fi
	set -a
	source "$CEPH_DIR/env"
	set +a
}

# ceph_apart_up: ceph_up, and the cluster's second OSD, with pool apart on
# it alone (cluster.sh add-osd; the rbd pool stays on osd.0). Sets
# CEPH_POOL_APART.
ceph_apart_up() {
	ceph_up
	if [ ! -f "$CEPH_ST/apart.rc" ]; then
		ceph_part apart
	else
		"$E2E_DIR/../ceph/cluster.sh" add-osd "$CEPH_DIR" >>"$RESULTS/ceph-start.log" 2>&1 ||
			fail "starting osd.1 again: $(tail -5 "$RESULTS/ceph-start.log")"
	fi
	set -a
	source "$CEPH_DIR/env"
	set +a
	[ -n "${CEPH_POOL_APART:-}" ] || fail "cluster.sh add-osd wrote no CEPH_POOL_APART"
}

# rbd_admin ARGS...: the rbd command as the cluster's administrator.
# The rbd command waits for the OSDs without a limit of its own.
rbd_admin() { timeout 120 rbd --conf "$CEPH_CONF" --id admin --keyring "$CEPH_ADMIN_KEYRING" "$@"; }

# serve_rbd NQN IMAGE SIZE: start the target with one subsystem whose
# namespace 1 is the RBD image IMAGE (created with SIZE), reached as the
# cluster's RBD user.
serve_rbd() {
	serve "$1" "[{nsid: 1, backend: rbd, pool: $CEPH_POOL, image: $2, create: true, size: $3}]" "$METRICS_ON
ceph: {conf: $CEPH_CONF, user: $CEPH_USER, keyring: $CEPH_KEYRING}"
}

# --- multipath: two controllers of one subsystem on one host ---

# ha_pair NQN STATE_A STATE_B [PORT_A_KEYS [PORT_B_KEYS]]: write the
# configurations of two daemons serving NQN as one subsystem: A
# (/tmp/a.yaml: port 1 on ADDR, controller IDs 1-99, metrics on
# 127.0.0.1:9750) and B (/tmp/b.yaml: port 2 on ADDR2, IDs 100-199,
# b_settings), with the same serial and one namespace in ANA group 1 over
# the shared disk (shared_disk ha-a ha-b), whose state is STATE_A on A's
# port and STATE_B on B's. PORT_*_KEYS are more keys for that port's flow
# mapping (referrals: [...]).
ha_pair() {
	local nqn=$1
	config /tmp/a.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
ports: [{id: 1, address: $ADDR, port: $PORT, ana: {1: $2}${4:+, $4}}]
$(ha_subsystem "$nqn" 1 99 /dev/mapper/ha-a)
CFG
	config /tmp/b.yaml <<CFG
$(b_settings)
ports: [{id: 2, address: $ADDR2, port: $PORT, ana: {1: $3}${5:+, $5}}]
$(ha_subsystem "$nqn" 100 199 /dev/mapper/ha-b)
CFG
}

# ha_up NQN STATE_A STATE_B [PORT_A_KEYS [PORT_B_KEYS]]: the pair of
# ha_pair over the shared disk, both daemons started (addr2_up first).
ha_up() {
	shared_disk ha-a ha-b
	ha_pair "$@"
	start_target /tmp/a.yaml
	start_target2 /tmp/b.yaml
}

# ha_subsystem NQN CNTLID_MIN CNTLID_MAX DEVICE: the subsystems section of
# one side of ha_pair.
ha_subsystem() {
	cat <<YAML
subsystems:
  - nqn: $1
    serial: HA0000001
    allow_any_host: true
    cntlid_min: $2
    cntlid_max: $3
    namespaces: [{nsid: 1, backend: block, path: $4, ana_group: 1}]
YAML
}

# connect_at ADDR NQN [extra nvme-cli args]: connect to NQN through ADDR and
# print the controller (nvmeN) once it is live.
connect_at() {
	local addr=$1 nqn=$2 c
	shift 2
	nvme connect -t rdma -a "$addr" -s "$PORT" -n "$nqn" "$@" >&2 || fail "nvme connect $nqn at $addr"
	wait_for 10 "a live controller of $nqn at $addr" ctrl_live_at "$nqn" "$addr"
	ctrl_at "$nqn" "$addr"
}

# ctrl_at NQN ADDR: the host's controller (nvmeN) of NQN whose transport
# address is ADDR, whatever its state.
ctrl_at() {
	local c
	for c in /sys/class/nvme/nvme*; do
		val "$c/subsysnqn" && [ "$REPLY" = "$1" ] || continue
		if val "$c/address" && [[ $REPLY == *"traddr=$2,"* ]]; then
			echo "${c##*/}"
			return 0
		fi
	done
	return 1
}

# ctrl_live_at NQN ADDR: that controller exists and is live.
ctrl_live_at() {
	local c
	c=$(ctrl_at "$1" "$2") && val "/sys/class/nvme/$c/state" && [ "$REPLY" = live ]
}

# path_of CTRL NSID: the controller's path to namespace NSID: the hidden
# disk (nvmeXcYnZ) native multipath sends that controller's I/O through.
path_of() {
	local d
	for d in "/sys/class/nvme/$1"/nvme*c*n*; do
		if val "$d/nsid" && [ "$REPLY" = "$2" ]; then
			echo "${d##*/}"
			return 0
		fi
	done
	return 1
}

# ana_state CTRL NSID: the ANA state the host holds for the path
# ("none" while the path is missing).
ana_state() {
	local p
	p=$(path_of "$1" "$2") || { echo none; return 0; }
	val "/sys/class/nvme/$1/$p/ana_state" || REPLY=none
	echo "$REPLY"
}

# ana_state_is CTRL NSID STATE: for polling.
ana_state_is() { [ "$(ana_state "$1" "$2")" = "$3" ]; }

# path_ios CTRL NSID: reads plus writes completed through the path, from
# its block statistics (0 while the path is missing).
path_ios() {
	local p
	p=$(path_of "$1" "$2") || { echo 0; return 0; }
	local f
	read -r -a f <"/sys/class/nvme/$1/$p/stat"
	echo $((f[0] + f[4]))
}

# path_inflight CTRL NSID: requests outstanding on the path.
path_inflight() {
	local p
	p=$(path_of "$1" "$2") || { echo 0; return 0; }
	local f
	read -r -a f <"/sys/class/nvme/$1/$p/stat"
	echo "${f[8]}"
}

# path_ios_above CTRL NSID N: more than N I/Os went through the path.
path_ios_above() { [ "$(path_ios "$1" "$2")" -gt "$3" ]; }

# ns_heads NQN: how many namespace block devices the host made for NQN
# (with native multipath, one per namespace however many paths).
ns_heads() {
	local s d n=0
	for s in /sys/class/nvme-subsystem/nvme-subsys*; do
		val "$s/subsysnqn" && [ "$REPLY" = "$1" ] || continue
		for d in "$s"/nvme*n*; do
			[ -b "/dev/${d##*/}" ] && n=$((n + 1))
		done
	done
	echo "$n"
}

# ha_connect_both NQN [extra nvme-cli args]: connect to NQN through both
# daemons of a pair, A at ADDR and B at ADDR2. Sets ca and cb, the two
# controllers, and dev, namespace 1's block device, which native
# multipath makes over both paths.
ha_connect_both() {
	local nqn=$1
	shift
	ca=$(connect_at "$ADDR" "$nqn" "$@")
	cb=$(connect_at "$ADDR2" "$nqn" "$@")
	dev=$(wait_dev "$nqn" 1)
}

# fio_verify_bg NAME SIZE EVENT: fio_ok NAME in the background on dev
# (ha_connect_both): SIZE written in 64 KiB blocks with crc32c checksums,
# then read back, the first mismatch fatal. Sets job, the fio arguments
# (for verify-only passes later), and fio_pid. Returns once 256 I/Os went
# through A's path (ca), the optimized one; fails if fio ended first, as
# EVENT would then not happen under I/O.
fio_verify_bg() {
	local name=$1 size=$2 event=$3 a0
	job=(--filename="$dev" --direct=1 --ioengine=libaio --rw=write --bs=64k --iodepth=16 --size="$size"
		--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_dump=1 --verify_state_save=0)
	a0=$(path_ios "$ca" 1)
	fio_ok "$name" "${job[@]}" &
	fio_pid=$!
	wait_for 60 "256 I/Os through A" fio_busy_on_a $((a0 + 256)) "$event"
}

# fio_busy_on_a N EVENT: A's path has done more than N I/Os while the
# background fio still runs; fails once fio has ended.
fio_busy_on_a() {
	gone "$fio_pid" && fail "fio ended before $2"
	path_ios_above "$ca" 1 "$1"
}

# --- gateway pair: two daemons, one RBD image, the ANA group's owner by lease ---

# gw_pair NQN IMAGE SIZE: create the RBD image IMAGE (SIZE) and write the
# configurations of two gateways exporting it as one subsystem: A
# (/tmp/a.yaml: port 1 on ADDR, controller IDs 1-99) and B (/tmp/b.yaml:
# b_settings, port 2 on ADDR2, IDs 100-199). Same serial and namespace
# UUID; ANA group 1 is the gateway group, its lease object named after
# IMAGE, lease_seconds 6. The image is in GW_IMAGE_POOL (default
# CEPH_POOL, where the lease object is).
gw_pair() {
	local nqn=$1 image=$2 size=$3
	rbd_admin create --size "$size" "${GW_IMAGE_POOL:-$CEPH_POOL}/$image" >/dev/null 2>&1 || fail "rbd create $image"
	config /tmp/a.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
$(gw_settings gw-a "$image")
ports: [{id: 1, address: $ADDR, port: $PORT}]
$(gw_subsystem "$nqn" 1 99 "$image")
CFG
	config /tmp/b.yaml <<CFG
$(b_settings)
$(gw_settings gw-b "$image")
ports: [{id: 2, address: $ADDR2, port: $PORT}]
$(gw_subsystem "$nqn" 100 199 "$image")
CFG
}

# gw_pair_up: start A (/tmp/a.yaml) and wait until it owns group 1, then
# B (/tmp/b.yaml), standing by.
gw_pair_up() {
	start_target /tmp/a.yaml
	wait_for 30 "A owning group 1" gw_state_is a owner
	start_target2 /tmp/b.yaml
	wait_for 10 "B standing by" gw_state_is b standby
}

gw_settings() {
	cat <<YAML
ceph: {conf: $CEPH_CONF, user: $CEPH_USER, keyring: $CEPH_KEYRING}
gateway: {name: $1, pool: $CEPH_POOL, lease_prefix: e2e.$2, lease_seconds: 6, groups: [1]}
YAML
}

gw_subsystem() {
	cat <<YAML
subsystems:
  - nqn: $1
    serial: GW0000001
    allow_any_host: true
    cntlid_min: $2
    cntlid_max: $3
    namespaces: [{nsid: 1, backend: rbd, pool: ${GW_IMAGE_POOL:-$CEPH_POOL}, image: $4, uuid: 5d1c8f3e-2a47-4b6e-9c01-3f2e4d5a6b7c}]
YAML
}

# gw_addr a|b|c: GW_ADDR is the daemon's metrics address.
gw_addr() {
	case $1 in
	a) GW_ADDR=127.0.0.1:9750 ;;
	b) GW_ADDR=$B_METRICS ;;
	c) GW_ADDR=127.0.0.1:9752 ;;
	*) fail "gw_addr: no daemon $1" ;;
	esac
}
# gw_state a|b|c [GROUP]: the daemon's lease state of GROUP (default 1:
# standby, owner, blocklisted), from its metrics (A's on 127.0.0.1:9750,
# B's on B_METRICS, C's on 127.0.0.1:9752); nothing while it does not
# answer. Polled often: bash alone, where ctl and jq would start two
# processes, a second or two of the emulated guest's time.
gw_state() {
	gw_addr "$1"
	local re="nvmeof_tgt_gateway_lease_state\\{group=\"${2:-1}\",state=\"([a-z]+)\"\\} 1"$'\n'
	http_get "$GW_ADDR" /metrics 2>/dev/null && [[ $HTTP_BODY =~ $re ]] && echo "${BASH_REMATCH[1]}"
	return 0
}
gw_state_is() { [ "$(gw_state "$1")" = "$2" ]; }
# gw_rebuilt a|b|c: the daemon stands by with its blocklisted client
# rebuilt, once. (Past its local deadline, a daemon stands by before any
# call to the cluster, an instant before it finds itself blocklisted.)
gw_rebuilt() {
	gw_addr "$1"
	http_get "$GW_ADDR" /metrics 2>/dev/null || return 1
	[ "$(metric_in nvmeof_tgt_gateway_lease_state 'group="1",state="standby"')" = 1 ] &&
		[ "$(metric_in nvmeof_tgt_gateway_rebuilds_total 'group="1"')" = 1 ]
}
# gw_owned a|b|c GROUP...: those of the GROUPs the daemon owns, as
# " 1 3 " (" " for none), from one read of its metrics.
gw_owned() {
	local owned=" " g
	gw_addr "$1"
	shift
	if http_get "$GW_ADDR" /metrics 2>/dev/null; then
		for g in "$@"; do
			[ "$(metric_in nvmeof_tgt_gateway_lease_state "group=\"$g\",state=\"owner\"")" != 1 ] || owned+="$g "
		done
	fi
	echo "$owned"
}
# gw_since_ms DAEMON STATE: when DAEMON's group 1 took STATE, in ms since
# the epoch by the daemon's own clock (ctl list's since); fails while the
# group is in another state.
gw_since_ms() {
	local sock=() since
	[ "$1" = a ] || sock=(-socket "/run/nvmeof-tgt/$1.sock")
	since=$("$NVMEOF_TGT" ctl "${sock[@]}" list -json 2>/dev/null |
		jq -r --arg st "$2" '.gateway.groups[0] | select(.state == $st) | .since // empty')
	[ -n "$since" ] && date -d "$since" +%s%3N
}

# gw_holder_addr IMAGE: the client address recorded in group 1's lease
# object, without its messenger type, as the OSD blocklist has it.
gw_holder_addr() {
	timeout 30 rados --conf "$CEPH_CONF" --id admin --keyring "$CEPH_ADMIN_KEYRING" -p "$CEPH_POOL" \
		getxattr "e2e.$1.group.1" nvmeof-tgt.holder | sed -n 3p | sed 's/^[a-z0-9]*://'
}

# ceph_mon JSON: a monitor command as the cluster's administrator, through
# test/ceph/cmd/cephmon (the ceph tool starts Python: seconds in the
# emulated guest).
ceph_mon() { timeout 30 "$CEPHMON" -conf "$CEPH_CONF" -keyring "$CEPH_ADMIN_KEYRING" "$1"; }

# blocklisted ADDR: the OSD blocklist names ADDR. (The monitors answer
# with two lists, the addresses' and the ranges'.)
blocklisted() {
	ceph_mon '{"prefix": "osd blocklist ls", "format": "json"}' 2>/dev/null |
		jq -se --arg a "$1" 'add | any(.[]; .addr == $a)' >/dev/null
}

# now_ms: monotonic-enough wall time in milliseconds, for measuring.
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# --- the versioned-block writer (test/e2e/vblock) on dev ---

# Its ledger: the newest acknowledged version of every block, which a
# later run continues and verify checks against.
VB_LEDGER=/tmp/$SCENARIO-vblock.ledger
VB_LOG=$RESULTS/$SCENARIO-vblock.log

# vblock_bg CTRL EVENT: the writer in the background on dev, rewriting
# 1024 blocks of 4 KiB with 8 writes in flight, continuing the ledger.
# Sets vb_pid. Returns once 256 I/Os went through CTRL's path; fails if the
# writer ended first, as EVENT would then not happen under I/O.
vblock_bg() {
	local n0
	n0=$(path_ios "$1" 1)
	"$VBLOCK" write -dev "$dev" -ledger "$VB_LEDGER" -blocks 1024 -writers 8 >>"$VB_LOG" 2>&1 &
	vb_pid=$!
	wait_for 60 "256 writes through $1" vblock_busy_on "$1" $((n0 + 256)) "$2"
}

# vblock_busy_on CTRL N EVENT: CTRL's path has done more than N I/Os while
# the writer runs; fails once the writer has ended.
vblock_busy_on() {
	gone "$vb_pid" && fail "the writer ended before $3: $(tail -5 "$VB_LOG")"
	path_ios_above "$1" 1 "$2"
}

# vblock_stop: stop the writer (SIGINT: its writes in flight complete,
# then it saves the ledger) and print its figures; any I/O error the
# writer saw fails the scenario. Sets vb_longest_ms, its slowest write.
vblock_stop() {
	local rc=0
	kill -INT "$vb_pid"
	wait "$vb_pid" || rc=$?
	[ "$rc" = 0 ] || fail "the writer exited with $rc: $(grep -m5 'vblock: ' "$VB_LOG")"
	tail -1 "$VB_LOG"
	vb_longest_ms=$(tail -1 "$VB_LOG" | sed -n 's/.*longest write \([0-9]*\) ms$/\1/p')
	[ -n "$vb_longest_ms" ] || fail "no figures from the writer: $(tail -3 "$VB_LOG")"
}

# vblock_verify WHAT: every block holds its newest acknowledged version.
vblock_verify() {
	"$VBLOCK" verify -dev "$dev" -ledger "$VB_LEDGER" >>"$VB_LOG" 2>&1 ||
		fail "$1: blocks without their newest version: $(grep -A10 'vblock: verified' "$VB_LOG" | tail -11)"
	echo "$1: $(grep 'vblock: verified' "$VB_LOG" | tail -1)"
}

# Reservations with two host identities in one guest.
# connect_host TRADDR NQN HOSTNQN [CTRL_LOSS_TMO [OPTIONS]]: a controller
# of the host HOSTNQN (its host ID the UUID in it) to NQN at TRADDR:$PORT
# over RDMA; prints its device, /dev/nvmeN. OPTIONS are more of the
# kernel's connect options (",keep_alive_tmo=30"). Through
# /dev/nvme-fabrics: nvme-cli takes a second controller to one subsystem
# address for a duplicate of the first, whatever its host NQN.
connect_host() {
	local c
	c=$(fabrics_connect "$(printf 'transport=rdma,traddr=%s,trsvcid=%s,nqn=%s,hostnqn=%s,hostid=%s,ctrl_loss_tmo=%s,reconnect_delay=1%s' \
		"$1" "$PORT" "$2" "$3" "${3##*uuid:}" "${4:-60}" "${5:-}")") || fail "connect as $3 to $1"
	wait_for 10 "/dev/$c appearing" test -c "/dev/$c"
	echo "/dev/$c"
}
# fabrics_connect OPTIONS: connect as nvme-cli does, by writing OPTIONS
# (transport=rdma,traddr=...) to /dev/nvme-fabrics, and print the new
# controller's name (nvmeN). No process starts, and nothing scans every
# controller in sysfs for a duplicate, as nvme-cli's connect does; the
# kernel's refusal goes to standard error.
fabrics_connect() {
	local line=""
	exec 3<>/dev/nvme-fabrics
	printf '%s' "$1" >&3 && read -r line <&3
	exec 3>&-
	[[ $line =~ instance=([0-9]+) ]] || { echo "connect $1: the kernel answered '$line' ($(dmesg | tail -1))" >&2; return 1; }
	echo "nvme${BASH_REMATCH[1]}"
}
# resv_report DEV: namespace 1's extended Reservation Status through the
# controller DEV, as "gen rtype regctl key@hostid,..." (the host ID's first
# 8 digits, * after the holder's).
resv_report() {
	nvme resv-report "$1" -n 1 --eds -o json | jq -r '"\(.gen) \(.rtype) \(.regctl) " +
		([.regctlext[]? | "\(.rkey)@\(.hostid | tostring | .[0:8])\(if .rcsts % 2 == 1 then "*" else "" end)"] | join(","))'
}
# resv_conflicts CMD...: CMD fails with Reservation Conflict.
resv_conflicts() {
	local out
	if out=$("$@" 2>&1); then
		fail "$* succeeded, want Reservation Conflict"
	fi
	grep -qi 'reservation.conflict' <<<"$out" || fail "$*: $out (want Reservation Conflict)"
	echo "ok: $* -> Reservation Conflict"
}

# --- a block device per controller: native multipath off ---

# NVME_HOST_MODULES: the host's NVMe modules host_multipath_off unloaded,
# which host_multipath_default loads again; NVME_MULTIPATH_WAS, nvme_core's
# multipath parameter before.
NVME_HOST_MODULES=()
NVME_MULTIPATH_WAS=Y

# host_multipath_off: load the host's NVMe modules again with native
# multipath off (nvme_core multipath=N), so that every controller of a
# shared namespace has a block device of its own (ctrl_ns_dev) instead of
# one device over all of them: each host NQN of this guest then does its
# I/O through its own controller, and a write one of them had refused is
# not sent again down another's path. Nothing may be connected. At the
# scenario's exit, after cleanup, host_multipath_default loads the modules
# with the kernel's default again, for the scenarios that follow.
host_multipath_off() {
	nvme disconnect-all >/dev/null 2>&1 || true
	NVME_MULTIPATH_WAS=$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null || echo Y)
	trap 'cleanup; host_multipath_default' EXIT
	nvme_host_unload nvme_core || fail "unloading the host's NVMe modules: $(lsmod | grep '^nvme' | tr '\n' ' ')"
	modprobe nvme_core multipath=N || fail "modprobe nvme_core multipath=N"
	modprobe nvme_rdma || fail "modprobe nvme_rdma"
	assert_eq "nvme_core multipath" "$(cat /sys/module/nvme_core/parameters/multipath)" N
}

# nvme_host_unload MODULE: unload MODULE after every loaded module that
# uses it, adding each to NVME_HOST_MODULES.
nvme_host_unload() {
	local h
	[ -d "/sys/module/$1" ] || return 0
	for h in "/sys/module/$1"/holders/*; do
		[ -e "$h" ] || continue
		nvme_host_unload "$(basename "$h")" || return 1
	done
	NVME_HOST_MODULES+=("$1")
	rmmod "$1"
}

# host_multipath_default: undo host_multipath_off (an EXIT trap's, after
# cleanup disconnected everything); a failure fails the scenario, as the
# ones that follow would find native multipath off.
host_multipath_default() {
	local m ok=1 was=("${NVME_HOST_MODULES[@]}")
	nvme disconnect-all >/dev/null 2>&1 || true
	nvme_host_unload nvme_core || ok=""
	if [ -n "$ok" ]; then
		for m in "${was[@]}"; do
			modprobe "$m" || ok=""
		done
	fi
	if [ -z "$ok" ] || [ "$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null)" != "$NVME_MULTIPATH_WAS" ]; then
		echo "FAIL: nvme_core multipath not back to $NVME_MULTIPATH_WAS: modules $(lsmod | grep '^nvme' | awk '{print $1}' | tr '\n' ' ')" >&2
		exit 1
	fi
	echo "nvme_core multipath back to $NVME_MULTIPATH_WAS"
}

# ctrl_ns_dev CTRL NSID: /dev/nvmeXnY of namespace NSID through the
# controller CTRL (nvmeN), once it appears. Without native multipath
# (host_multipath_off) each controller has its own.
ctrl_ns_dev() {
	poll 10 ctrl_ns "$1" "$2" >/dev/null || fail "no block device for namespace $2 through $1"
	ctrl_ns "$1" "$2"
}

# ctrl_ns CTRL NSID: print that device if the host has it.
ctrl_ns() {
	local d
	for d in /sys/class/nvme/"$1"/nvme*n*; do
		val "$d/nsid" && [ "$REPLY" = "$2" ] && [ -b "/dev/${d##*/}" ] || continue
		echo "/dev/${d##*/}"
		return 0
	done
	return 1
}

# --- one daemon's traffic to one OSD held in the network ---

# hold_osd_traffic PID OSD: the packets PID's sockets send to osd.OSD are
# held on lo (a plug qdisc; the rest of lo's traffic passes as before)
# until release_osd_traffic: to the daemon, its writes there are stuck in
# the network, and time out in the cluster; once let go, they land. Sets
# HELD_PORTS, the daemon's local ports, and HELD_OSD, the OSD's address.
hold_osd_traffic() {
	local p
	HELD_OSD=$(ceph_mon '{"prefix": "osd dump", "format": "json"}' | jq -r --argjson id "$2" '.osds[] | select(.osd == $id) | .public_addrs.addrvec[0].addr')
	[ -n "$HELD_OSD" ] || fail "no address for osd.$2 in the OSD map"
	HELD_PORTS=$(ss -tnpH "( dport = :${HELD_OSD##*:} )" | grep "pid=$1," | while read -r _ _ _ local _; do echo "${local##*:}"; done)
	[ -n "$HELD_PORTS" ] || fail "pid $1 has no connection to osd.$2 ($HELD_OSD)"
	# A prio qdisc: the default three bands as without it, and a fourth,
	# plugged, for the daemon's sockets.
	tc qdisc add dev lo root handle 1: prio bands 4 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1 ||
		fail "tc: adding a prio qdisc to lo"
	tc qdisc add dev lo parent 1:4 handle 40: plug limit 33554432 || fail "tc: adding a plug qdisc"
	tc qdisc change dev lo parent 1:4 handle 40: plug block || fail "tc: plugging"
	for p in $HELD_PORTS; do
		tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip sport "$p" 0xffff match ip dport "${HELD_OSD##*:}" 0xffff flowid 1:4 ||
			fail "tc: holding the packets from port $p"
	done
	echo "holding the packets of pid $1 to osd.$2 $HELD_OSD (from port(s) $HELD_PORTS)"
}

# held_unacked: the bytes the held sockets sent that the OSD has not
# acknowledged (on lo, acknowledged within a millisecond unless held).
held_unacked() {
	local p n=0 _ q
	for p in $HELD_PORTS; do
		while read -r _ _ q _; do n=$((n + q)); done < <(ss -tnH "( sport = :$p )")
	done
	echo "$n"
}
# held_write: a write's worth (4 KiB) is held.
held_write() { [ "$(held_unacked)" -ge 4096 ]; }
held_acked() { [ "$(held_unacked)" = 0 ]; }

# release_osd_traffic: let the held packets go, wait until the OSD has
# acknowledged every byte, and take the qdiscs away.
release_osd_traffic() {
	local t0 bytes
	bytes=$(held_unacked)
	tc qdisc change dev lo parent 1:4 handle 40: plug release_indefinite || fail "tc: letting the held packets go"
	t0=$(now_ms)
	wait_for 30 "osd's acknowledgement of the held bytes" held_acked
	echo "$HELD_OSD acknowledged the $bytes held bytes $(($(now_ms) - t0)) ms after the network let them go"
	tc qdisc del dev lo root || fail "tc: removing the qdiscs"
}
