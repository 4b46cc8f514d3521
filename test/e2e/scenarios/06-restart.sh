# SIGTERM stops the daemon cleanly (exit 0) even with a host connected;
# started again, it serves the same data.
nqn=nqn.2026-11.io.example:vol1
serve_file "$nqn" /data/restart.img 128MiB
dev=$(connect "$nqn")
head -c $((8 << 20)) /dev/urandom >/tmp/pattern
dd if=/tmp/pattern of="$dev" bs=1M oflag=direct status=none
want=$(sha256sum </tmp/pattern)
# Stop with the host still connected: the daemon must not hang on it.
stop_target
disconnect "$nqn"
start_target /tmp/tgt.yaml
dev=$(connect "$nqn")
assert_eq "data after restart" "$(head -c $((8 << 20)) "$dev" | sha256sum)" "$want"
disconnect "$nqn"
stop_target
