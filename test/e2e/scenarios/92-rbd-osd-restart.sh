# The OSD stopped and started again under fio random writes with crc32c
# verification (verify_backlog: every block written is read back and
# checked during the run). While the OSD is down, I/O fails in the daemon
# after rados_osd_op_timeout (10 s by default) with the retryable status
# Namespace Not Ready, which the host retries; once the OSD is back, I/O
# resumes. fio must end with 0 errors and no verify failure; the daemon's
# generic error count shows the retries happened, and the host's error
# log that they were Namespace Not Ready without DNR.
daemon_only "the rbd backend is nvmeof-tgt's"
ceph_up
nqn=nqn.2026-11.io.example:rbd3
serve_rbd "$nqn" osd 64MiB
dev=$(connect "$nqn" --ctrl-loss-tmo=120 --reconnect-delay=1)
echo "host retries per command (nvme_core max_retries): $(cat /sys/module/nvme_core/parameters/max_retries)"
generic_errors() { local v; v=$(metric nvmeof_tgt_command_errors_total 'type="generic"'); echo "${v:-0}"; }
writes() { local v; v=$(metric nvmeof_tgt_writes_completed_total); echo "${v:-0}"; }
errs0=$(generic_errors)
# Depth 16, all of it in flight at librbd (asynchronous calls): each
# command fails after one timeout, none waits behind another's.
# 120 s at most: the OSD's stop and start take up to 45 s, and writes
# must resume after it while fio still runs, however long Ceph took to
# get fio's first 1000 writes done (past one verify backlog of 512; the
# single-OSD cluster does about 65 a second on a busy 2-core machine).
# Once 500 more writes completed after the restart, fio is stopped.
out=$RESULTS/$SCENARIO-fio.json
fio --name=osd --filename="$dev" --ioengine=libaio --direct=1 --rw=randwrite --bs=4k --iodepth=16 \
	--size=32m --time_based --runtime=120 --verify=crc32c --verify_backlog=512 --verify_state_save=0 \
	--output-format=json --output="$out" &
fio_pid=$!
writes_over() { gone "$fio_pid" && fail "fio ended early: $(tail -5 "$out")"; [ "$(writes)" -gt "$1" ]; }
wait_for 45 "writes under way" writes_over 1000
stop_at=$SECONDS
"$E2E_DIR/../ceph/cluster.sh" stop-osd "$CEPH_DIR" >>"$RESULTS/$SCENARIO-ceph.log" 2>&1 || fail "stopping the OSD"
echo "OSD down after $((SECONDS - stop_at)) s"
errors_over() { gone "$fio_pid" && fail "fio ended while the OSD was down: $(tail -5 "$out")"; [ "$(generic_errors)" -gt "$1" ]; }
wait_for 40 "commands failing with a retryable status while the OSD is down" errors_over "$errs0"
echo "first retryable errors $((SECONDS - stop_at)) s after the stop"
# The errors are Namespace Not Ready (SCT 0, SC 82h) without DNR, as the
# host's view of the error log says: status_field holds the status
# without its phase bit (SC in bits 0-7, SCT in 8-10, DNR in 14).
errlog=$RESULTS/$SCENARIO-error-log.json
nvme error-log "/dev/$(ctrl_of "$nqn")" -e 64 -o json >"$errlog" || fail "nvme error-log"
jq -e '[.errors[] | select(.status_field % 2048 == 130 and (.status_field / 16384 | floor) % 2 == 0)] | length > 0' "$errlog" >/dev/null ||
	fail "no Namespace Not Ready without DNR in the host's error log: $(jq -c '[.errors[] | .status_field] | unique' "$errlog")"
echo "ok: the host's error log holds Namespace Not Ready (82h) without DNR"
"$E2E_DIR/../ceph/cluster.sh" start-osd "$CEPH_DIR" >>"$RESULTS/$SCENARIO-ceph.log" 2>&1 ||
	fail "starting the OSD: $(cat "$RESULTS/$SCENARIO-ceph.log"; tail -5 "$CEPH_DIR/log/osd-start.log")"
cat "$RESULTS/$SCENARIO-ceph.log"
echo "OSD up again $((SECONDS - stop_at)) s after the stop"
w=$(writes)
wait_for 40 "writes resuming after the OSD came back" writes_over $((w + 500))
echo "writes resumed $((SECONDS - stop_at)) s after the stop; stopping fio"
fio_interrupt "$fio_pid" "$out"
[ "$FIO_STATUS" = 0 ] || [ "$FIO_STATUS" = 128 ] || fail "fio exit status $FIO_STATUS: $(tail -5 "$out")"
assert_eq "fio errors" "$(jq '[.jobs[].error] | add' "$out")" 0
echo "fio wrote $(jq '[.jobs[].write.io_bytes] | add' "$out") bytes and verified $(jq '[.jobs[].read.io_bytes] | add' "$out")"
[ "$(jq '[.jobs[].read.io_bytes] | add' "$out")" -gt 0 ] || fail "fio verified nothing"
echo "retryable errors the host retried: $(( $(generic_errors) - errs0 ))"
assert_eq "controller state" "$(cat /sys/class/nvme/$(ctrl_of "$nqn")/state)" live
disconnect "$nqn"
stop_target
