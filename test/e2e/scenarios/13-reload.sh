# Live reconfiguration with SIGHUP: a namespace added to and one removed
# from a connected subsystem appear and disappear on the host, one that
# grows keeps its block device and shows the new size, a new
# subsystem shows in discovery, fio on an unaffected subsystem runs on
# without errors, and a broken file leaves the target serving as before.
daemon_only "SIGHUP reload is nvmeof-tgt's"
steady=nqn.2026-11.io.example:steady
moving=nqn.2026-11.io.example:moving
added=nqn.2026-11.io.example:added
write_config() { # namespaces of $moving, extra subsystems
	config /tmp/tgt.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $steady
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: /data/steady.img, size: 256MiB}]
  - nqn: $moving
    allow_any_host: true
    namespaces: [$1]
$2
CFG
}
write_config "{nsid: 1, backend: nullblk, size: 64MiB}, {nsid: 2, backend: file, path: /data/ns2.img, size: 32MiB}" ""
start_target /tmp/tgt.yaml
sdev=$(connect "$steady")
mdev1=$(connect "$moving")
mdev2=$(wait_dev "$moving" 2)
echo "steady $sdev, moving $mdev1 $mdev2"

# fio with verification on the steady subsystem for the whole reload.
fio_start steady --filename="$sdev" --rw=randwrite --bs=4k --iodepth=16 --ioengine=libaio --direct=1 \
	--size=64m --verify=crc32c --verify_backlog=256
# steady_writing: the target counted writes to the steady subsystem.
steady_writing() {
	gone "$FIO_PID" && fail "fio on $steady ended early: $(tail -5 "$RESULTS/$SCENARIO-steady.out")"
	[ "$(printf '%.0f' "$(metric nvmeof_tgt_written_bytes_total "subsystem=\"$steady\"")")" -gt 0 ]
}
wait_for 10 "fio writing to $steady" steady_writing

# A persistent discovery controller hears of the new subsystem: the Linux
# host turns the discovery-log-change event into a uevent.
udevadm monitor --kernel --property --subsystem-match=nvme >/tmp/uevents 2>&1 &
mon_pid=$!
# udevadm prints its header once it listens.
wait_for 10 "udevadm monitor listening" grep -q "kernel uevent" /tmp/uevents
nvme discover -t rdma -a "$ADDR" -s "$PORT" -p >/dev/null || fail "nvme discover -p"
disc_live() {
	local x
	for x in /sys/class/nvme/nvme*; do
		[ "$(cat "$x/subsysnqn")" = nqn.2014-08.org.nvmexpress.discovery ] && [ "$(cat "$x/state")" = live ] && return 0
	done
	return 1
}
wait_for 10 "a live persistent discovery controller" disc_live

# Namespace 1 grows, namespace 2 goes, namespace 3 comes, a subsystem is added.
write_config "{nsid: 1, backend: nullblk, size: 96MiB}, {nsid: 3, backend: nullblk, size: 48MiB, block_size: 4096}" \
	"  - {nqn: $added, allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 16MiB}]}"
kill -HUP "$TARGET_PID"
mdev3=$(wait_dev "$moving" 3)
echo "namespace 3 appeared as $mdev3"
assert_eq "size of the added namespace" "$(blockdev --getsize64 "$mdev3")" $((48 << 20))
wait_ns_gone "$moving" 2
echo "ok: namespace 2 ($mdev2) disappeared"
size_is() { [ "$(blockdev --getsize64 "$1")" = "$2" ]; }
wait_for 10 "namespace 1 growing to 96 MiB" size_is "$mdev1" $((96 << 20))
assert_eq "namespace 1 grown in place, same device $mdev1" "$(blockdev --getsize64 "$mdev1")" $((96 << 20))
dd if="$mdev1" of=/dev/null bs=1M count=4 skip=90 iflag=direct status=none || fail "namespace 1 of $moving: reading the grown part"
nvme discover -t rdma -a "$ADDR" -s "$PORT" | grep -q "subnqn: *$added" || fail "discovery does not list the added subsystem"
echo "ok: discovery lists $added"
poll 5 grep -q "NVME_AEN=0x70f002" /tmp/uevents || fail "no discovery-log-change event reached the host: $(grep NVME_AEN /tmp/uevents || echo none)"
kill "$mon_pid" 2>/dev/null || true
echo "ok: the persistent discovery controller got the discovery-log-change event"
assert_eq "configuration generation" "$(metric nvmeof_tgt_config_generation)" 2

# A broken file changes nothing and says why.
cp /tmp/tgt.yaml /tmp/good.yaml
printf 'ports: [{id: 1, address: %s, port: %s}]\nsubsystems: [{nqn: %s, namespaces: [{nsid: 0, backend: floppy}]}]\n' "$ADDR" "$PORT" "$steady" >/tmp/tgt.yaml
kill -HUP "$TARGET_PID"
wait_for 5 "the rejected reload logged" grep -q "reload rejected" "$RESULTS/$SCENARIO-target.log"
grep "reload rejected" "$RESULTS/$SCENARIO-target.log" | grep -q "subsystems\[0\].namespaces\[0\]" || fail "the rejected reload does not name the field"
assert_eq "last reload successful" "$(metric nvmeof_tgt_config_last_reload_successful)" 0
assert_eq "generation after a rejected reload" "$(metric nvmeof_tgt_config_generation)" 2
[ -b "$mdev3" ] || fail "namespace 3 went away after a rejected reload"
dd if="$mdev3" of=/dev/null bs=1M count=4 iflag=direct status=none || fail "I/O after a rejected reload"

fio_finish steady
if grep -F "controller removed" "$RESULTS/$SCENARIO-target.log" | grep -qF "$steady"; then
	fail "the steady subsystem's controller was disturbed"
fi
cp /tmp/good.yaml /tmp/tgt.yaml
nvme disconnect-all >/dev/null
stop_target
