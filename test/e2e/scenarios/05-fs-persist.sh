# mkfs.ext4, mount, write 20 MB, unmount, disconnect, reconnect, mount
# again: the checksum is the same.
nqn=nqn.2026-11.io.example:vol1
serve_file "$nqn" /data/fs.img 256MiB
dev=$(connect "$nqn")
want=$(fs_write "$dev")
disconnect "$nqn"
dev=$(connect "$nqn")
fs_check "$dev" "checksum after reconnect" "$want"
disconnect "$nqn"
stop_target
