# A restart or an upgrade with a host connected. SIGTERM stops the daemon
# cleanly (exit 0) even with the host still connected. The host, connected
# with a controller-loss timeout, keeps its block device: it reconnects
# by itself once the daemon runs again (another binary file, as in an
# upgrade), the device keeps its name, UUID and serial, and a write issued
# while no daemon ran completes after the reconnect. The figures (seconds
# down, seconds to reconnect) are printed for docs/operations.md.
nqn=nqn.2026-11.io.example:vol1
# Our serial is derived from the NQN; the kernel target, the suite's
# reference, makes up a new one per configuration unless told.
config /tmp/tgt.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $nqn
    allow_any_host: true
$(ours || echo "    serial: e2e-restart")
    namespaces: [{nsid: 1, backend: file, path: /data/restart.img, size: 128MiB}]
CFG
start_target /tmp/tgt.yaml
dev=$(connect "$nqn" --ctrl-loss-tmo=60 --reconnect-delay=1)
c=$(ctrl_of "$nqn")
uuid=$(cat "/sys/block/${dev#/dev/}/uuid")
serial=$(cat "/sys/class/nvme/$c/serial")
echo "connected: $dev on $c, uuid $uuid, serial $serial"
head -c $((8 << 20)) /dev/urandom >/tmp/pattern
head -c $((8 << 20)) /dev/urandom >/tmp/gap
dd if=/tmp/pattern of="$dev" bs=1M oflag=direct status=none
want=$(sha256sum </tmp/pattern)
want_gap=$(sha256sum </tmp/gap)

# Stop with the host still connected: the daemon must not hang on it.
stop_target
down=$(date +%s.%N)
ctrl_is() { [ "$(cat "/sys/class/nvme/$c/state")" = "$1" ]; }
poll 10 eval '! ctrl_is live' || true
echo "controller $c is $(cat "/sys/class/nvme/$c/state") with the daemon stopped"
# A write while no target runs: the host holds it until the reconnect.
dd if=/tmp/gap of="$dev" bs=1M seek=16 oflag=direct conv=fsync status=none &
writer=$!

cp "$NVMEOF_TGT" /tmp/nvmeof-tgt-upgraded
NVMEOF_TGT=/tmp/nvmeof-tgt-upgraded start_target /tmp/tgt.yaml
up=$(date +%s.%N)
poll 60 ctrl_is live || true
assert_eq "controller $c state after the restart" "$(cat "/sys/class/nvme/$c/state")" live
live=$(date +%s.%N)
rc=0
wait "$writer" || rc=$?
assert_eq "exit status of the write issued while the target was down" "$rc" 0
done_at=$(date +%s.%N)
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b - a}'; }
echo "figures: target down $(secs "$down" "$up") s; host live again $(secs "$up" "$live") s after the start; the write from the gap done $(secs "$up" "$done_at") s after the start"

assert_eq "block device after the restart" "$(wait_dev "$nqn")" "$dev"
assert_eq "controller after the restart" "$(ctrl_of "$nqn")" "$c"
assert_eq "namespace UUID after the restart" "$(cat "/sys/block/${dev#/dev/}/uuid")" "$uuid"
assert_eq "serial after the restart" "$(cat "/sys/class/nvme/$c/serial")" "$serial"
assert_eq "data written before the restart" "$(head -c $((8 << 20)) "$dev" | sha256sum)" "$want"
assert_eq "data written while the target was down" \
	"$(dd if="$dev" bs=1M skip=16 count=8 iflag=direct status=none | sha256sum)" "$want_gap"
disconnect "$nqn"
stop_target
