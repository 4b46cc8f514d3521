# The same fio jobs run without errors on a nullblk namespace (reads return
# zeros, so there is nothing to verify: plain writes and reads).
nqn=nqn.2026-11.io.example:null1
serve "$nqn" "[{nsid: 1, backend: nullblk, size: 1GiB}]"
dev=$(connect "$nqn")
assert_eq "device size" "$(blockdev --getsize64 "$dev")" $((1 << 30))
common=(--filename="$dev" --ioengine=libaio --direct=1 --iodepth=16 --bsrange=4k-1m --size=48m)
fio_ok write --rw=randwrite "${common[@]}"
[ "$FIO_WRITTEN" -ge $((48 << 20)) ] || fail "fio wrote only $FIO_WRITTEN bytes"
fio_ok read --rw=randread "${common[@]}"
[ "$FIO_READ" -ge $((48 << 20)) ] || fail "fio read only $FIO_READ bytes"
head -c 1048576 "$dev" | cmp -s - <(head -c 1048576 /dev/zero) || fail "nullblk read returned data"
disconnect "$nqn"
stop_target
