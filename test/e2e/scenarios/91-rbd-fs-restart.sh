# mkfs.ext4 on an RBD namespace, a file written and checksummed, the
# daemon restarted (SIGTERM, start again): the host mounts it again and
# the checksum is the same. Then, with the daemon stopped, `rbd export`
# of the image holds the same file system and file.
daemon_only "the rbd backend is nvmeof-tgt's"
ceph_up
nqn=nqn.2026-11.io.example:rbd2
serve_rbd "$nqn" fs 128MiB
dev=$(connect "$nqn")
want=$(fs_write "$dev")
disconnect "$nqn"
stop_target
start_target /tmp/tgt.yaml
dev=$(connect "$nqn")
fs_check "$dev" "checksum after the daemon restarted" "$want"
disconnect "$nqn"
stop_target
# What the host wrote is in the cluster.
rbd_admin export "$CEPH_POOL/fs" /data/fs.export >/dev/null 2>&1 || fail "rbd export"
modprobe loop || fail "loading the loop driver"
mkdir -p /mnt/export
mount -o ro,loop /data/fs.export /mnt/export || fail "mounting the exported image"
got=$(sha256sum </mnt/export/file.bin)
umount /mnt/export
rm -f /data/fs.export
assert_eq "checksum of the file in the rbd export" "$got" "$want"
