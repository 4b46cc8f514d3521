# Controller lifecycle as the host drives it: nvme reset, a persistent
# discovery controller (nvme discover -p) with keep alive, and a target
# restart under a connected host that reconnects by itself with its data
# intact.
nqn=nqn.2026-11.io.example:vol1
serve_file "$nqn" /data/life.img 128MiB
dev=$(connect "$nqn" --ctrl-loss-tmo=120 --reconnect-delay=1)
c=$(ctrl_of "$nqn")

# Reset: the host tears the queues down and builds them again.
nvme reset "/dev/$c" || fail "nvme reset"
for _ in $(seq 100); do [ "$(cat /sys/class/nvme/$c/state)" = live ] && break; sleep 0.1; done
assert_eq "state after reset" "$(cat /sys/class/nvme/$c/state)" live
dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 status=none
dd if=/tmp/pattern of="$dev" bs=1M oflag=direct conv=fsync status=none || fail "write after reset"
want=$(sha256sum </tmp/pattern)

# Persistent discovery controller with keep alive.
nvme discover -t rdma -a "$ADDR" -s "$PORT" -p >/dev/null || fail "nvme discover -p"
disc=""
for x in /sys/class/nvme/nvme*; do
	[ "$(cat "$x/subsysnqn")" = nqn.2014-08.org.nvmexpress.discovery ] && disc=$(basename "$x")
done
[ -n "$disc" ] || fail "no persistent discovery controller"
echo "persistent discovery controller $disc, kato $(cat /sys/class/nvme/$disc/kato 2>/dev/null || echo ?)"
sleep 12 # several keep-alive periods
assert_eq "discovery controller state after 12 s" "$(cat /sys/class/nvme/$disc/state)" live

# Restart the target under the connected host.
stop_target
sleep 2
start_target /tmp/tgt.yaml
for _ in $(seq 300); do [ "$(cat /sys/class/nvme/$c/state 2>/dev/null)" = live ] && break; sleep 0.1; done
assert_eq "state after target restart" "$(cat /sys/class/nvme/$c/state)" live
assert_eq "data after reconnect" "$(head -c $((4 << 20)) "$dev" | sha256sum)" "$want"
dd if=/tmp/pattern of="$dev" bs=1M seek=8 oflag=direct status=none || fail "I/O did not resume"
echo "ok: I/O resumed after the target restart"
nvme disconnect-all >/dev/null
stop_target
