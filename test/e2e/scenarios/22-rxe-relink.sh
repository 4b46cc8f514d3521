# The RDMA device fails under a connected host. First its port goes down
# (eth0 down: IBV_EVENT_PORT_ERR): the daemon disconnects the queue pairs
# on it and counts the event. Then the soft-RoCE link on eth0 is deleted
# and added again: the daemon lets go of the device (so the deletion
# completes), survives, listens again once the link is back, and I/O
# resumes with the data intact.
#
# Host and target share the guest's one soft-RoCE device. A port flap
# breaks rxe's connection manager until the link is re-created, so the
# host (whose keep alive fails) stays "connecting" until then, and must
# come back live by itself, with the same controller, once the daemon
# listens on the new link: a host that had to be connected again fails.
daemon_only "device removal handling is nvmeof-tgt's"
nqn=nqn.2026-11.io.example:relink
link=$(rdma link show | awk '/netdev eth0/ { split($2, a, "/"); print a[1]; exit }')
[ -n "$link" ] || fail "no soft-RoCE link on eth0: $(rdma link show)"
config /tmp/tgt.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - {nqn: $nqn, allow_any_host: true, namespaces: [{nsid: 1, backend: file, path: /data/relink.img, size: 64MiB}]}
CFG
start_target /tmp/tgt.yaml
log=$RESULTS/$SCENARIO-target.log
dev=$(connect "$nqn" --ctrl-loss-tmo=120 --reconnect-delay=8)
c=$(ctrl_of "$nqn")
dd if=/dev/urandom of=/tmp/pattern22 bs=1M count=4 status=none
dd if=/tmp/pattern22 of="$dev" bs=1M oflag=direct conv=fsync status=none || fail "write before the link goes"
want=$(sha256sum </tmp/pattern22)

# Port down and up: the host keeps its controller and reconnects.
mark=$(dmesg | wc -l)
ip link set eth0 down
wait_for 10 "queue pairs disconnected on the port error" grep -q "disconnecting the affected queue pairs" "$log"
grep "disconnecting the affected queue pairs" "$log" | grep -q "port error" || fail "no queue pair disconnected on the port error: $(tail -5 "$log")"
echo "ok: $(grep 'disconnecting the affected queue pairs' "$log" | head -1 | cut -c1-220)"
ip link set eth0 up
kill -0 "$TARGET_PID" 2>/dev/null || fail "the daemon died on the port error: $(tail -20 "$log")"
# Let the host notice (keep alive) and finish its error recovery, so that
# it waits out its reconnect delay when its device goes. A host inside a
# reconnect attempt when the device goes deletes the controller and waits
# for the attempt, whose connection manager events never come while the
# device is going: the link deletion then hangs in the host's kernel, with
# nothing the target can do. The 8 s delay leaves the deletion (about a
# second) the whole window.
reconnect_wait() { dmesg | tail -n +"$((mark + 1))" | grep -q "$c: Reconnecting in"; }
wait_for 40 "the host waiting out its reconnect delay" reconnect_wait
assert_eq "host controller after the port error" "$(cat /sys/class/nvme/$c/state 2>/dev/null || echo gone)" connecting
# The event name has a space, which metric's filter cannot hold.
metric nvmeof_tgt_build_info >/dev/null
got=$(awk '/^nvmeof_tgt_rdma_device_events_total[{].*event="port error"/ { print $NF }' /tmp/metrics.txt)
[ -n "$got" ] && [ "$got" -ge 1 ] || fail "port error not counted: $(grep rdma_device_events /tmp/metrics.txt)"
echo "ok: port errors counted: $got"

# The kernel completes the deletion only once every user closed the
# device; a process holding it keeps "rdma link delete" in the kernel,
# deaf to signals, so wait for it here and show what holds it.
rdma link delete "$link" &
del_pid=$!
if ! poll 30 gone "$del_pid"; then
	echo "--- rdma link delete, kernel stack" >&2
	cat "/proc/$del_pid/stack" >&2 || true
	for t in /proc/[0-9]*; do
		if grep -q "rdma\|uverbs" "$t/stack" 2>/dev/null; then
			echo "--- $(cat "$t/comm") ($(basename "$t"))" >&2
			cat "$t/stack" >&2
		fi
	done
	echo "--- daemon's RDMA files" >&2
	ls -l "/proc/$TARGET_PID/fd" | grep -E "infiniband|uverbs|rdma" >&2 || true
	kill -QUIT "$TARGET_PID"
	poll 5 gone "$TARGET_PID" || true # the goroutine dump is written
	fail "rdma link delete $link did not complete within 30 s: the daemon holds the device (goroutines in $log)"
fi
wait "$del_pid" || fail "rdma link delete $link failed"
echo "ok: $link deleted"
poll 10 grep -q "went away" "$log" || fail "the device removal was not logged: $(tail -10 "$log")"
kill -0 "$TARGET_PID" 2>/dev/null || fail "the daemon died when the device went away: $(tail -20 "$log")"
assert_eq "host controller after the removal" "$(cat /sys/class/nvme/$c/state 2>/dev/null || echo deleted by the host)" connecting

rdma link add "$link" type rxe netdev eth0 || fail "rdma link add $link"
poll 20 grep -q 'msg="listening again"' "$log" || fail "the daemon did not listen again: $(tail -10 "$log")"
echo "ok: $(grep 'msg="listening again"' "$log" | tail -1 | cut -c1-200)"

# The host kept the controller and reconnects by itself.
wait_for 60 "$c live after the link is back" ctrl_state_is "$c" '^live$'
assert_eq "host controller state after the link is back" "$(cat /sys/class/nvme/$c/state)" live
assert_eq "the host's controller for $nqn" "$(ctrl_of "$nqn")" "$c"
dev=$(wait_dev "$nqn")
assert_eq "data after the device came back" "$(head -c $((4 << 20)) "$dev" | sha256sum)" "$want"
fio_ok after --filename="$dev" --rw=randrw --bs=16k --iodepth=8 --ioengine=libaio --direct=1 --size=16m --verify=crc32c
got=$(metric nvmeof_tgt_rdma_device_events_total 'event="RDMA_CM_EVENT_DEVICE_REMOVAL"')
[ -n "$got" ] && [ "$got" -ge 1 ] || fail "device removal not counted: $(grep rdma_device_events /tmp/metrics.txt)"
echo "ok: device removals counted: $got"
! grep -q "panic" "$log" || fail "panic in the daemon log"
nvme disconnect-all >/dev/null
stop_target
