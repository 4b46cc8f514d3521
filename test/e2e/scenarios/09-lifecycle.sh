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
wait_for 10 "$c live after reset" ctrl_state_is "$c" '^live$'
assert_eq "state after reset" "$(cat /sys/class/nvme/$c/state)" live
dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 status=none
dd if=/tmp/pattern of="$dev" bs=1M oflag=direct conv=fsync status=none || fail "write after reset"
want=$(sha256sum </tmp/pattern)

# Persistent discovery controller with keep alive. The host's own trace
# of the commands it sends counts the Keep Alives.
tr=/sys/kernel/tracing
[ -e $tr/trace ] || mount -t tracefs nodev $tr || fail "mounting tracefs"
echo 1 >$tr/events/nvme/nvme_setup_cmd/enable || fail "enabling the nvme_setup_cmd trace event"
echo >$tr/trace
nvme discover -t rdma -a "$ADDR" -s "$PORT" -p --keep-alive-tmo=2 >/dev/null || fail "nvme discover -p"
disc=""
for x in /sys/class/nvme/nvme*; do
	[ "$(cat "$x/subsysnqn")" = nqn.2014-08.org.nvmexpress.discovery ] && disc=$(basename "$x")
done
[ -n "$disc" ] || fail "no persistent discovery controller"
echo "persistent discovery controller $disc, kato $(cat /sys/class/nvme/$disc/kato 2>/dev/null || echo ?)"
# The target tears a controller down kato + 1 s (3 s) after the last
# command; the host sends Keep Alive every kato/2, so six of them outlast
# that.
keep_alives() { grep -c "$disc: .*nvme_admin_keep_alive" $tr/trace || true; }
six_keep_alives() {
	ctrl_state_is "$disc" '^live$' || fail "discovery controller $disc is $(cat /sys/class/nvme/$disc/state) after $(keep_alives) Keep Alives"
	[ "$(keep_alives)" -ge 6 ]
}
wait_for 60 "six Keep Alives to $disc" six_keep_alives
echo 0 >$tr/events/nvme/nvme_setup_cmd/enable
assert_eq "discovery controller state after $(keep_alives) Keep Alives" "$(cat /sys/class/nvme/$disc/state)" live
# Gone before the restart: nvme discover (start_target's check) would go
# through it, and it reconnects only after its reconnect delay (10 s).
nvme disconnect -d "$disc" >/dev/null || fail "nvme disconnect -d $disc"

# Restart the target under the connected host.
stop_target
wait_for 30 "the host noticing the target stopped" ctrl_state_is "$c" '^(resetting|connecting)$'
start_target /tmp/tgt.yaml
wait_for 30 "$c live again after the restart" ctrl_state_is "$c" '^live$'
assert_eq "state after target restart" "$(cat /sys/class/nvme/$c/state)" live
assert_eq "data after reconnect" "$(head -c $((4 << 20)) "$dev" | sha256sum)" "$want"
dd if=/tmp/pattern of="$dev" bs=1M seek=8 oflag=direct status=none || fail "I/O did not resume"
echo "ok: I/O resumed after the target restart"
nvme disconnect-all >/dev/null
stop_target
