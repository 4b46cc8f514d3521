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
# Kill once the writer is well under way.
writer_under_way "$dev" 500 60
at_kill=$(wc -l <"$REC")
kill9_target
echo "daemon killed with the writer at record line $at_kill; controller $c is $(cat /sys/class/nvme/$c/state)"
start_target /tmp/tgt.yaml
writer_went_on "$at_kill"
assert_eq "controller state after the restart" "$(cat /sys/class/nvme/$c/state)" live
"$DURABILITY" verify -dev "$dev" -record "$REC" || fail "read back through the host"
disconnect "$nqn"
stop_target
"$DURABILITY" verify -dev /data/kill9.img -record "$REC" || fail "read back from the backing file"
