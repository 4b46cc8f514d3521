# A write the host was told is durable is durable: the block namespace
# sits on dm-log-writes, which logs writes in the order they reach stable
# media (a plain write only once a flush after it completes, a FUA write at
# once). test/durability's writer writes through the Linux host, makes
# batches durable with RWF_DSYNC (FUA writes on the wire) or fdatasync (an
# NVMe Flush), marks the log at each durable point, and the checker replays
# the log to every mark as a power cut there and compares with what the
# writer was promised. The fdatasync run comes first: it passes whatever
# the target does with FUA, so it shows the harness itself sound. The
# RWF_DSYNC run goes through both I/O engines, io_uring and threads: each
# makes a FUA write durable its own way.
[ -b /dev/vdb ] || fail "no second virtio disk for the logged device"
[ -x "${DURABILITY:-}" ] || fail "DURABILITY (the test/durability tool) is not set by the harness"
modprobe dm-log-writes || fail "modprobe dm-log-writes"
nqn=nqn.2026-11.io.example:durable
# vdb carved in two with dm-linear: 64 MiB of data, the rest for the log.
data_sectors=131072
log_sectors=$(($(cat /sys/block/vdb/size) - data_sectors))
# No udev in the guest: dmsetup makes the /dev/mapper nodes itself.
export DM_DISABLE_UDEV=1
dm() { dmsetup "$@"; }
dm_teardown() {
	for d in logw dlw-log dlw-data; do
		dmsetup remove "$d" >/dev/null 2>&1 || true
	done
}
trap 'cleanup; dm_teardown' EXIT
dm create dlw-data --table "0 $data_sectors linear /dev/vdb 0" || fail "dmsetup create dlw-data"
dm create dlw-log --table "0 $log_sectors linear /dev/vdb $data_sectors" || fail "dmsetup create dlw-log"
[ -b /dev/mapper/dlw-log ] || fail "dmsetup made no /dev/mapper/dlw-log"
# target_config ENGINE: the daemon's file, with that I/O engine.
target_config() {
	config /tmp/tgt.yaml <<CFG
io_engine: $1
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $nqn
    allow_any_host: true
    namespaces: [{nsid: 1, backend: block, path: /dev/mapper/logw}]
CFG
}

# run DURABLE ENGINE: one writer run through a fresh log, then the check.
# Prints the checker's report; returns its exit status.
run() {
	local durable=$1 engine=$2 rec=$RESULTS/$SCENARIO-$1-$2.record rc=0
	# A stale super block from an earlier run must not pass for this log.
	dd if=/dev/zero of=/dev/mapper/dlw-log bs=4096 count=1 oflag=direct status=none || fail "zeroing the log's super block"
	dm create logw --table "0 $data_sectors log-writes /dev/mapper/dlw-data /dev/mapper/dlw-log" ||
		fail "dmsetup create logw"
	target_config "$engine"
	local mark
	mark=$(wc -l <"$RESULTS/$SCENARIO-target.log" 2>/dev/null || echo 0)
	start_target /tmp/tgt.yaml
	tail -n +"$((mark + 1))" "$RESULTS/$SCENARIO-target.log" | grep '"nvmeof-tgt serving"' | grep -q "io_engine=$engine" ||
		fail "the daemon does not serve with io_engine=$engine: $(grep 'nvmeof-tgt serving' "$RESULTS/$SCENARIO-target.log" | tail -1)"
	local dev
	dev=$(connect "$nqn") || fail "connect $nqn"
	echo "--- $durable, $engine engine: writing $dev (log-writes over /dev/mapper/dlw-data)"
	"$DURABILITY" write -dev "$dev" -record "$rec" -durable "$durable" -mark-dm logw \
		-blocks 1024 -batches 120 -depth 8 || fail "writer ($durable) failed: I/O errors or a mark not set"
	disconnect "$nqn"
	stop_target
	local status
	status=$(dmsetup status logw)
	echo "dm-log-writes status: $status"
	case $status in *logging_disabled*) fail "dm-log-writes stopped logging (log device full?)" ;; esac
	# Removing the target logs what is still unflushed and the final super block.
	dm remove logw || fail "dmsetup remove logw"
	blockdev --flushbufs /dev/mapper/dlw-log /dev/mapper/dlw-data
	"$DURABILITY" check -log /dev/mapper/dlw-log -data /dev/mapper/dlw-data -record "$rec" || rc=$?
	[ "$rc" -le 1 ] || fail "the $durable check could not run (exit $rc)"
	return "$rc"
}

flush_rc=0 fua_rc=0 fua_threads_rc=0
run fdatasync io_uring || flush_rc=$?
run dsync io_uring || fua_rc=$?
run dsync threads || fua_threads_rc=$?
assert_eq "power-cut check of writes made durable by fdatasync (NVMe Flush)" "$flush_rc" 0
assert_eq "power-cut check of writes made durable by RWF_DSYNC (NVMe Write with FUA), io_uring" "$fua_rc" 0
assert_eq "power-cut check of writes made durable by RWF_DSYNC (NVMe Write with FUA), threads" "$fua_threads_rc" 0
