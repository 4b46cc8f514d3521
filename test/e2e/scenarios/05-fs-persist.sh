# mkfs.ext4, mount, write 20 MB, unmount, disconnect, reconnect, mount
# again: the checksum is the same.
nqn=nqn.2026-11.io.example:vol1
serve_file "$nqn" /data/fs.img 256MiB
dev=$(connect "$nqn")
mkfs.ext4 -q -F "$dev"
mkdir -p /mnt/e2e
mount "$dev" /mnt/e2e
head -c 20000000 /dev/urandom >/mnt/e2e/file.bin
want=$(sha256sum </mnt/e2e/file.bin)
umount /mnt/e2e
disconnect "$nqn"
dev=$(connect "$nqn")
mount "$dev" /mnt/e2e
assert_eq "checksum after reconnect" "$(sha256sum </mnt/e2e/file.bin)" "$want"
umount /mnt/e2e
disconnect "$nqn"
stop_target
