# fio random writes of 4 KiB to 1 MiB at queue depth 16 with crc32c
# verification, then a verify-only read pass: no errors on a file
# namespace (O_DIRECT on ext4).
nqn=nqn.2026-11.io.example:vol1
serve_file "$nqn" /data/fio.img 256MiB
dev=$(connect "$nqn")
# The guest kernel (6.1) has io_uring, so io_engine: auto (the default)
# must have taken it for this file namespace.
if ours; then
	grep -q "io_engine=io_uring" "$RESULTS/$SCENARIO-target.log" || fail "the daemon did not start with io_uring: $(grep -m1 serving "$RESULTS/$SCENARIO-target.log")"
	echo "ok: io_engine=io_uring"
fi
fio_write_verify "$dev" 48 42
# The verify pass must be able to fail: corrupt the first 4 KiB and expect
# fio to report it.
dd if=/dev/urandom of="$dev" bs=4096 count=1 oflag=direct status=none
if fio --name=corrupt --rw=randwrite --verify_only=1 "${FIO_VERIFY[@]}" >"$RESULTS/$SCENARIO-corrupt.txt" 2>&1; then
	fail "fio verified a corrupted device"
fi
grep -qiE "bad magic|verify.*(fail|bad)" "$RESULTS/$SCENARIO-corrupt.txt" || fail "fio failed without a verify error: $(tail -5 "$RESULTS/$SCENARIO-corrupt.txt")"
echo "ok: fio detects a corrupted block"
disconnect "$nqn"
stop_target
