# Admin and I/O commands through nvme-cli: identify, SMART counters that
# move with I/O, the error log, every feature, flush, write zeroes,
# deallocate (nvme dsm --ad and blkdiscard), compare.
daemon_only "identify values, logs and features are nvmeof-tgt's own"
nqn=nqn.2026-11.io.example:vol1
serve_file "$nqn" /data/admin.img 64MiB
dev=$(connect "$nqn")
ctrl=/dev/$(ctrl_of "$nqn")

idctrl=$(nvme id-ctrl "$ctrl" -o json)
jqs "$idctrl" .cmic .oncs .fuses .vwc .mdts
# Multi-port, multi-controller and ANA reporting (bits 0, 1 and 3), as the kernel target.
assert_eq "CMIC multi-port, multi-controller, ANA" "${JQ[0]}" 11
# The host's multipath read the ANA log at connect; nvme-cli reads it too.
nvme ana-log "$ctrl" >/dev/null || fail "nvme ana-log"
echo "ok: ANA log"
assert_eq "ONCS compare, DSM, write zeroes, reservations" "${JQ[1]}" 45
assert_eq "FUSES compare and write" "${JQ[2]}" 1
# A file namespace: a volatile write cache. Ours also says Flush takes
# the broadcast NSID (bits 2:1 = 11b); the kernel target leaves them 00b.
vwc=1
ours && vwc=7
assert_eq "VWC" "${JQ[3]}" "$vwc"
assert_eq "MDTS (1 MiB in 4 KiB pages)" "${JQ[4]}" 8
# Passthrough I/O of a whole MDTS, which the block layer cannot split.
head -c $((1 << 20)) /dev/urandom >/tmp/mdts.in
nvme write "$dev" --start-block=8 --block-count=2047 --data-size=$((1 << 20)) --data=/tmp/mdts.in >/dev/null || fail "1 MiB passthrough write"
nvme read "$dev" --start-block=8 --block-count=2047 --data-size=$((1 << 20)) --data=/tmp/mdts.out >/dev/null || fail "1 MiB passthrough read"
cmp /tmp/mdts.in /tmp/mdts.out || fail "1 MiB passthrough read back differs"
echo "ok: 1 MiB passthrough write and read"
descs=$(nvme ns-descs "$dev" -o json)
assert_eq "ns-descs types" "$(echo "$descs" | jq -c '[.["ns-descs"][].type] | sort')" '["csi","eui64","nguid","uuid"]'

# SMART counters move after I/O.
before=$(nvme smart-log "$ctrl" -o json)
dd if=/dev/urandom of="$dev" bs=1M count=8 oflag=direct status=none
dd if="$dev" of=/dev/null bs=1M count=4 iflag=direct status=none
after=$(nvme smart-log "$ctrl" -o json)
keys=(data_units_written host_write_commands data_units_read host_read_commands)
# 128-bit counters come as strings; one jq for both logs.
jqs "[$before, $after]" "${keys[@]/#/.[0].}" "${keys[@]/#/.[1].}"
for i in "${!keys[@]}"; do
	k=${keys[$i]} b=${JQ[$i]} a=${JQ[$((i + ${#keys[@]}))]}
	[ "$a" -gt "$b" ] || fail "smart-log $k did not move: $b -> $a"
	echo "ok: smart-log $k $b -> $a"
done
written=$((JQ[4] - JQ[0]))
[ "$written" -ge 16 ] || fail "8 MiB written should be at least 16 data units, got $written"

# An error lands in the error log.
errs_before=$(nvme error-log "$ctrl" -e 1 -o json | jq '.errors[0].error_count')
if nvme read "$dev" -s $((64 << 20 >> 9)) -c 0 -z 512 -d /dev/null >/dev/null 2>&1; then
	fail "read past the end succeeded"
fi
errs_after=$(nvme error-log "$ctrl" -e 1 -o json | jq '.errors[0].error_count')
[ "$errs_after" -gt "$errs_before" ] || fail "error log count did not move: $errs_before -> $errs_after"
echo "ok: error-log count $errs_before -> $errs_after"

# Every feature ID: nvme-cli walks them all, stops at any status but
# Invalid Field, and exits with the last one (0xff is unsupported).
features=$(nvme get-feature "$ctrl" 2>&1) || true
echo "$features"
if echo "$features" | grep "NVMe status" | grep -vq "Invalid Field"; then
	fail "get-feature stopped on an error"
fi
for f in "Arbitration" "Power Management" "Temperature Threshold" "Volatile Write Cache" "Number of Queues" "Keep Alive Timer"; do
	echo "$features" | grep -q "$f" || fail "get-feature lacks $f"
done
assert_eq "get-feature number of queues" "$(nvme get-feature "$ctrl" -f 7 -H | grep -c 'Number of IO')" 2

nvme flush "$dev" -n 1 || fail "nvme flush"

# Write zeroes reads back zeros.
dd if=/dev/urandom of="$dev" bs=4096 count=4 oflag=direct status=none
nvme write-zeroes "$dev" -n 1 -s 0 -c 31 || fail "nvme write-zeroes"
cmp -n 16384 "$dev" /dev/zero || fail "write-zeroes range is not zero"
echo "ok: write-zeroes reads back zeros"

# Deallocate with nvme dsm --ad and with blkdiscard.
dd if=/dev/urandom of="$dev" bs=1M count=2 oflag=direct status=none
nvme dsm "$dev" -n 1 --ad -s 0 -b 2048 || fail "nvme dsm --ad"
cmp -n $((1 << 20)) "$dev" /dev/zero || fail "dsm range is not zero"
blkdiscard -o $((1 << 20)) -l $((1 << 20)) "$dev" || fail "blkdiscard"
cmp -n $((1 << 20)) <(dd if="$dev" bs=1M skip=1 count=1 iflag=direct status=none) /dev/zero || fail "discarded range is not zero"
echo "ok: dsm --ad and blkdiscard read back zeros"

# Compare: equal data succeeds, different data fails with compare failure.
head -c 4096 /dev/urandom >/tmp/blk
dd if=/tmp/blk of="$dev" bs=4096 seek=100 oflag=direct status=none
nvme compare "$dev" -n 1 -s 800 -c 7 -z 4096 -d /tmp/blk || fail "nvme compare of equal data failed"
head -c 4096 /dev/urandom >/tmp/other
if out=$(nvme compare "$dev" -n 1 -s 800 -c 7 -z 4096 -d /tmp/other 2>&1); then
	fail "compare of different data succeeded"
fi
echo "$out" | grep -qi "compare" || fail "compare failure not reported as such: $out"
echo "ok: compare ($out)"
disconnect "$nqn"
stop_target
