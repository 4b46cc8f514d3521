# kill -9 of the daemon under write load: the host, connected with a
# generous controller-loss timeout, reconnects by itself once the daemon
# is back, retries what was outstanding, and the writer (test/durability,
# RWF_DSYNC and fdatasync batches) carries on without an I/O error. After
# it, every block holds the newest write acknowledged to it, read back
# both through the host and from the backing file.
daemon_only "kills the daemon's process"
[ -x "${DURABILITY:-}" ] || fail "DURABILITY (the test/durability tool) is not set by the harness"
nqn=nqn.2026-11.io.example:kill9
serve_file "$nqn" /data/kill9.img 64MiB
dev=$(connect "$nqn" --ctrl-loss-tmo=60 --reconnect-delay=1)
c=$(ctrl_of "$nqn")
rec=$RESULTS/$SCENARIO.record
"$DURABILITY" write -dev "$dev" -record "$rec" -durable dsync -blocks 1024 -batches 300 -depth 8 &
writer=$!
# Kill once the writer is well under way (its record grows per batch).
under_way() {
	gone "$writer" && fail "the writer ended before the kill: $(tail -3 "$rec")"
	[ -s "$rec" ] && [ "$(wc -l <"$rec")" -ge 500 ]
}
wait_for 60 "500 record lines from the writer" under_way
at_kill=$(wc -l <"$rec")
kill -9 "$TARGET_PID"
wait "$TARGET_PID" 2>/dev/null || true
TARGET_PID=""
echo "daemon killed with the writer at record line $at_kill; controller $c is $(cat /sys/class/nvme/$c/state)"
start_target /tmp/tgt.yaml
rc=0
wait "$writer" || rc=$?
assert_eq "writer exit status (an I/O error reached the application?)" "$rc" 0
lines=$(wc -l <"$rec")
[ "$lines" -gt "$at_kill" ] || fail "the writer made no progress after the restart ($lines record lines)"
echo "ok: the writer went on from record line $at_kill to $lines"
assert_eq "controller state after the restart" "$(cat /sys/class/nvme/$c/state)" live
"$DURABILITY" verify -dev "$dev" -record "$rec" || fail "read back through the host"
disconnect "$nqn"
stop_target
"$DURABILITY" verify -dev /data/kill9.img -record "$rec" || fail "read back from the backing file"
