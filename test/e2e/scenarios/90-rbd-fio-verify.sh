# An RBD namespace in a real Ceph cluster (cephx on): fio random writes of
# 4 KiB to 1 MiB with crc32c verification and a verify-only read pass; what
# the host reads is what `rbd export` gives; `rbd resize` and a reload
# reach the host.
daemon_only "the rbd backend is nvmeof-tgt's"
ceph_up
nqn=nqn.2026-11.io.example:rbd1
serve_rbd "$nqn" fio 64MiB
dev=$(connect "$nqn")
assert_eq "namespace size" "$(blockdev --getsize64 "$dev")" $((64 << 20))
fio_write_verify "$dev" 32 85
# The image in the cluster holds exactly what the host sees.
host_sum=$(dd if="$dev" bs=1M iflag=direct status=none | sha256sum)
rbd_admin export "$CEPH_POOL/fio" /data/fio.export >/dev/null 2>&1 || fail "rbd export"
assert_eq "rbd export checksum" "$(sha256sum </data/fio.export)" "$host_sum"
rm -f /data/fio.export
# Grow the image; a reload measures it again and the host sees the size.
rbd_admin resize --size 96M "$CEPH_POOL/fio" >/dev/null 2>&1 || fail "rbd resize"
"$NVMEOF_TGT" ctl reload >/dev/null || fail "ctl reload"
wait_for 15 "the host seeing the grown image" bash -c "[ \$(blockdev --getsize64 $dev) = $((96 << 20)) ]"
echo "ok: rbd resize + reload: the host sees 96 MiB"
disconnect "$nqn"
stop_target
