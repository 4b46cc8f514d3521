# fio verify on a block device (a virtio disk), on a buffered file, and
# two namespaces of different block sizes in one subsystem.
nqn=nqn.2026-11.io.example:multi
[ -b /dev/vdb ] || fail "no second virtio disk for the block backend"
serve "$nqn" "
      - {nsid: 1, backend: block, path: /dev/vdb}
      - {nsid: 2, backend: file, path: /tmp/buffered.img, size: 128MiB, block_size: 4096, buffered: true}"
nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$nqn" >/dev/null || fail "connect"
d1=$(wait_dev "$nqn" 1)
d2=$(wait_dev "$nqn" 2)
assert_eq "block namespace size" "$(blockdev --getsize64 "$d1")" "$(cat /sys/block/vdb/size | awk '{print $1 * 512}')"
assert_eq "block namespace block size" "$(blockdev --getss "$d1")" 512
assert_eq "file namespace block size" "$(blockdev --getss "$d2")" 4096
for d in "$d1" "$d2"; do
	common=(--filename="$d" --ioengine=libaio --direct=1 --iodepth=16 --bsrange=4k-1m --size=48m
		--verify=crc32c --verify_state_save=0 --randrepeat=1 --randseed=7)
	fio_ok "write-$(basename "$d")" --rw=randwrite --do_verify=0 "${common[@]}"
	fio_ok "verify-$(basename "$d")" --rw=randwrite --verify_only=1 "${common[@]}"
done
# The block device really holds the data.
dd if="$d1" bs=1M count=1 iflag=direct status=none | cmp - <(dd if=/dev/vdb bs=1M count=1 iflag=direct status=none) ||
	fail "data on /dev/vdb differs from what the host reads"
blkdiscard -o 0 -l $((1 << 20)) "$d1" || fail "blkdiscard on the block namespace"
echo "ok: discard passed down to the block device"
nvme disconnect-all >/dev/null
stop_target
