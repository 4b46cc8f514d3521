# The durability contract as the host sees it: Write Zeroes with deallocate
# reads back zeros on a block device, DLFEAT and VWC tell the truth per
# backend, the host can turn the write cache off, a full file system is
# Capacity Exceeded, an O_DIRECT namespace whose block size the device
# cannot do is refused at start, and the SMART log keeps its counters across
# reconnects and its lifetime across restarts and a kill -9.
daemon_only "behaviour specific to nvmeof-tgt (write cache feature, SMART lifetime, start-up checks)"
nqn=nqn.2026-11.io.example:durable
nocache=nqn.2026-11.io.example:nocache
full=nqn.2026-11.io.example:full
[ -b /dev/vdb ] || fail "no second virtio disk for the block backend"
mkdir -p /tmp/small
mount -t tmpfs -o size=4m tmpfs /tmp/small
rm -f /tmp/e2e-state.json
config /tmp/tgt.yaml <<CFG
state_file: /tmp/e2e-state.json
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $nqn
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: block, path: /dev/vdb}
      - {nsid: 2, backend: file, path: /data/durable.img, size: 64MiB}
  - nqn: $nocache
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 64MiB}]
  - nqn: $full
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: /tmp/small/sparse.img, size: 64MiB, buffered: true}]
CFG
start_target /tmp/tgt.yaml
nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$nqn" >/dev/null || fail "connect $nqn"
blk=$(wait_dev "$nqn" 1)
file=$(wait_dev "$nqn" 2)
ctrl=/dev/$(ctrl_of "$nqn")

# Write Zeroes with DEAC on the block device: zeros, never the old data (a
# discard of a virtio disk may leave it in place).
head -c $((1 << 20)) /dev/zero | tr '\0' '\253' | dd of="$blk" bs=1M oflag=direct status=none
nvme write-zeroes "$blk" --start-block=0 --block-count=2047 --deac >/dev/null || fail "write-zeroes --deac"
dd if="$blk" bs=1M count=1 iflag=direct status=none | cmp - <(head -c $((1 << 20)) /dev/zero) ||
	fail "write zeroes with deallocate left non-zero data on the block namespace"
echo "ok: write zeroes with deallocate reads back zeros on a block device"
assert_eq "DLFEAT of a block namespace (no zeros promised after a discard)" "$(nvme id-ns "$blk" -o json | jq .dlfeat)" 8
assert_eq "DLFEAT of a file namespace (holes read zeros)" "$(nvme id-ns "$file" -o json | jq .dlfeat)" 9

# The write cache: present for files and disks; the host may disable it.
assert_eq "VWC with a volatile cache" "$(nvme id-ctrl "$ctrl" -o json | jq .vwc)" 7
nvme get-feature "$ctrl" -f 6 | grep -Eq "Current value:(0x)?0*1$" || fail "write cache not reported enabled: $(nvme get-feature "$ctrl" -f 6)"
nvme set-feature "$ctrl" -f 6 -v 0 >/dev/null || fail "disabling the volatile write cache"
nvme get-feature "$ctrl" -f 6 | grep -Eq "Current value:(0x)?0+$" || fail "write cache still enabled: $(nvme get-feature "$ctrl" -f 6)"
dd if=/dev/urandom of="$file" bs=64k count=16 oflag=direct status=none || fail "writes with the cache disabled"
nvme set-feature "$ctrl" -f 6 -v 1 >/dev/null || fail "enabling the volatile write cache again"
echo "ok: the host turned the write cache off and on"

nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$nocache" >/dev/null || fail "connect $nocache"
wait_dev "$nocache" 1 >/dev/null
nc=/dev/$(ctrl_of "$nocache")
assert_eq "VWC without a volatile cache (nullblk)" "$(nvme id-ctrl "$nc" -o json | jq .vwc)" 0
if nvme set-feature "$nc" -f 6 -v 1 >/dev/null 2>&1; then
	fail "enabling a write cache that does not exist succeeded"
fi
echo "ok: no write cache to enable on nullblk"

# A sparse file on a full file system: Capacity Exceeded, not a media error.
nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$full" >/dev/null || fail "connect $full"
fd=$(wait_dev "$full" 1)
dmesg -C
if dd if=/dev/urandom of="$fd" bs=1M count=8 oflag=direct status=none 2>/tmp/dd.err; then
	fail "8 MiB written to a file system of 4 MiB"
fi
dmesg | grep -E "sc 0x81|Capacity Exceeded" >/dev/null ||
	fail "the host did not see Capacity Exceeded: $(cat /tmp/dd.err) $(dmesg | grep -i nvme | tail -5)"
echo "ok: a full file system is Capacity Exceeded ($(dmesg | grep -m1 -E 'sc 0x81|Capacity Exceeded'))"

# SMART counters belong to the subsystem: a reconnect keeps them.
writes() { nvme smart-log "$1" -o json | jq -r .host_write_commands; }
w1=$(writes "$ctrl")
[ "$w1" -gt 0 ] || fail "no host writes counted"
disconnect "$nqn"
nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$nqn" >/dev/null || fail "reconnect $nqn"
wait_dev "$nqn" 1 >/dev/null
ctrl=/dev/$(ctrl_of "$nqn")
assert_eq "host writes after a reconnect" "$(writes "$ctrl")" "$w1"

# Lifetime across restarts: a kill -9 is an unsafe shutdown, SIGTERM is not.
smart() { nvme smart-log "$ctrl" -o json | jq -r ".$1"; }
# restart HOW: end the daemon by kill -9 or SIGTERM, start it, reconnect.
restart() {
	nvme disconnect-all >/dev/null
	if [ "$1" = kill ]; then
		kill -9 "$TARGET_PID"
		wait "$TARGET_PID" 2>/dev/null || true
		TARGET_PID=""
	else
		stop_target
	fi
	start_target /tmp/tgt.yaml
	nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$nqn" >/dev/null || fail "connect after $1"
	wait_dev "$nqn" 1 >/dev/null
	ctrl=/dev/$(ctrl_of "$nqn")
}
assert_eq "power cycles of a fresh state file" "$(smart power_cycles)" 1
restart kill
assert_eq "power cycles after a restart" "$(smart power_cycles)" 2
assert_eq "unsafe shutdowns after kill -9" "$(smart unsafe_shutdowns)" 1
restart term
assert_eq "power cycles after a clean restart" "$(smart power_cycles)" 3
assert_eq "unsafe shutdowns after SIGTERM" "$(smart unsafe_shutdowns)" 1
nvme disconnect-all >/dev/null
stop_target

# O_DIRECT with 512-byte blocks on a file system of 4096-byte sectors:
# refused at start with the fix, not failing every I/O later.
modprobe loop 2>/dev/null || true
truncate -s 64M /data/lb4k.img
loopdev=$(losetup -f --show --sector-size 4096 /data/lb4k.img) || fail "losetup with 4096-byte sectors"
mkfs.ext4 -q -F "$loopdev"
mkdir -p /mnt/lb4k
mount "$loopdev" /mnt/lb4k
config /tmp/lb.yaml <<CFG
state_file: /tmp/e2e-state.json
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $nqn
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: /mnt/lb4k/ns.img, size: 16MiB, block_size: 512}]
CFG
rc=0
timeout 30 "$NVMEOF_TGT" -config /tmp/lb.yaml >/tmp/lb.log 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "the daemon started (rc $rc) with block_size 512 on a 4096-byte-sector device: $(tail -3 /tmp/lb.log)"
grep -q "block_size 512 is smaller than the 4096-byte alignment" /tmp/lb.log || fail "no clear start-up error: $(tail -3 /tmp/lb.log)"
echo "ok: refused at start: $(grep -o 'block_size 512 is smaller[^"]*' /tmp/lb.log | head -1)"
umount /mnt/lb4k
losetup -d "$loopdev"
umount /tmp/small
