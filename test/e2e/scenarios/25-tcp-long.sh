# e2e-timeout: 600
# NVMe/TCP through what an operator does to the daemon (in CI on 6.12;
# it passes on 6.1 too, E2E_KERNEL=6.1 E2E_ONLY='^25-tcp-long$').
# The host connects over TCP with digests and a controller-loss timeout:
# - an ext4 file system stays mounted across a restart (SIGTERM, start):
#   a write issued while no daemon runs completes after the host
#   reconnects, and both files read back whole after a remount;
# - kill -9 under a writer (test/durability): the host reconnects to the
#   restarted daemon, the writer sees no error, every block holds its
#   newest acknowledged write;
# - the daemon stopped (SIGSTOP) past the host's keep-alive timeout: the
#   host gives the connection up and, once the daemon runs again
#   (SIGCONT), reconnects; the daemon keeps one controller for it, not
#   the stale one beside the new, and I/O goes on.
daemon_only "restarts, kills and stops nvmeof-tgt"
[ -x "${DURABILITY:-}" ] || fail "DURABILITY (the test/durability tool) is not set by the harness"
modprobe nvme-tcp || fail "modprobe nvme-tcp"
nqn=nqn.2026-11.io.example:tcplong
# Port 1 (RDMA) only answers start_target's discovery; the host uses port 2.
config /tmp/tgt.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
ports:
  - {id: 1, address: $ADDR, port: $PORT}
  - {id: 2, transport: tcp, address: $ADDR, port: 4420}
subsystems:
  - nqn: $nqn
    allow_any_host: true
    ports: [1, 2]
    namespaces:
      - {nsid: 1, backend: file, path: /data/tcplong.img, size: 64MiB}
      - {nsid: 2, backend: file, path: /data/tcplong-kill9.img, size: 64MiB}
CFG
# See 24-tcp: host and target share the guest's kernel, whose hardened
# usercopy refuses our reads of the host's zero-copy sends across
# transparent huge pages.
thp=/sys/kernel/mm/transparent_hugepage/enabled
thp_was=$(sed 's/.*\[\(.*\)\].*/\1/' "$thp")
echo never >"$thp"
start_target /tmp/tgt.yaml
nvme connect -t tcp -a "$ADDR" -s 4420 -n "$nqn" --hdr-digest --data-digest --ctrl-loss-tmo=120 \
	--reconnect-delay=1 --keep-alive-tmo=5 >&2 || fail "nvme connect over TCP"
dev=$(wait_dev "$nqn" 1)
dev2=$(wait_dev "$nqn" 2)
c=$(ctrl_of "$nqn")
assert_eq "the controller's transport" "$(cat "/sys/class/nvme/$c/transport")" tcp
ctrl_is() { [ "$(cat "/sys/class/nvme/$c/state" 2>/dev/null)" = "$1" ]; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b - a}'; }

# --- a mounted file system across a restart ---
mkfs.ext4 -q -F "$dev" || fail "mkfs.ext4 on $dev"
mkdir -p /mnt/e2e
mount "$dev" /mnt/e2e || fail "mounting $dev"
head -c 8000000 /dev/urandom >/tmp/before.bin
head -c 2000000 /dev/urandom >/tmp/gap.bin
cp /tmp/before.bin /mnt/e2e/before.bin && sync -f /mnt/e2e || fail "writing before.bin"
stop_target
down=$(date +%s.%N)
# Written while no daemon runs: the host holds it until it reconnects.
(cp /tmp/gap.bin /mnt/e2e/gap.bin && sync -f /mnt/e2e) &
writer=$!
start_target /tmp/tgt.yaml
up=$(date +%s.%N)
wait_for 60 "the host reconnecting after the restart" ctrl_is live
live=$(date +%s.%N)
rc=0
wait "$writer" || rc=$?
assert_eq "the write issued while the daemon was down (status)" "$rc" 0
echo "figures: daemon down $(secs "$down" "$up") s; host live again $(secs "$up" "$live") s after the start"
umount /mnt/e2e || fail "unmounting $dev"
assert_eq "block device after the restart" "$(wait_dev "$nqn" 1)" "$dev"
mount "$dev" /mnt/e2e || fail "mounting $dev again"
assert_eq "before.bin after the restart" "$(sha256sum </mnt/e2e/before.bin)" "$(sha256sum </tmp/before.bin)"
assert_eq "gap.bin, written while the daemon was down" "$(sha256sum </mnt/e2e/gap.bin)" "$(sha256sum </tmp/gap.bin)"
umount /mnt/e2e || fail "unmounting $dev"

# --- kill -9 under a writer ---
writer_under_way "$dev2" 300 120
at_kill=$(wc -l <"$REC")
kill9_target
down=$(date +%s.%N)
start_target /tmp/tgt.yaml
up=$(date +%s.%N)
wait_for 60 "the host reconnecting after kill -9" ctrl_is live
live=$(date +%s.%N)
writer_went_on "$at_kill"
echo "figures: killed, started again $(secs "$down" "$up") s later; host live again $(secs "$up" "$live") s after the start"
"$DURABILITY" verify -dev "$dev2" -record "$REC" || fail "read back through the host after kill -9"

# --- keep-alive timeout with the daemon stopped ---
# ctrls: the daemon's controllers of the subsystem.
ctrls() { "$NVMEOF_TGT" ctl list -json | jq --arg n "$nqn" '[.subsystems[] | select(.nqn == $n) | .controllers[]] | length'; }
assert_eq "the daemon's controllers before SIGSTOP" "$(ctrls)" 1
exp0=$(metric nvmeof_tgt_keep_alive_expiries_total "subsystem=\"$nqn\"")
kill -STOP "$TARGET_PID"
stopped=$(date +%s.%N)
# The host's Keep Alive (every 5 s, --keep-alive-tmo) times out, and it
# gives the connection up.
if ! poll 60 eval '! ctrl_is live'; then
	kill -CONT "$TARGET_PID"
	fail "the host's controller still live 60 s after SIGSTOP, with a 5 s keep-alive timeout"
fi
gave_up=$(date +%s.%N)
echo "controller $c is $(cat "/sys/class/nvme/$c/state") $(secs "$stopped" "$gave_up") s after SIGSTOP"
kill -CONT "$TARGET_PID"
cont=$(date +%s.%N)
wait_for 90 "the host reconnecting after SIGCONT" ctrl_is live
echo "figures: host gave up $(secs "$stopped" "$gave_up") s after SIGSTOP; live again $(secs "$cont" "$(date +%s.%N)") s after SIGCONT"
one_ctrl() { [ "$(ctrls)" = 1 ]; }
wait_for 30 "the daemon down to one controller (the stale one torn down)" one_ctrl
echo "keep-alive expiries the daemon counted: $(metric nvmeof_tgt_keep_alive_expiries_total "subsystem=\"$nqn\"") (was ${exp0:-0}; 0 if the host's disconnect came first)"
"$DURABILITY" verify -dev "$dev2" -record "$REC" || fail "read back through the host after SIGSTOP and SIGCONT"
head -c $((4 << 20)) /dev/urandom >/tmp/after.bin
dd if=/tmp/after.bin of="$dev" bs=1M oflag=direct conv=fsync status=none || fail "writing after SIGCONT"
assert_eq "4 MiB written and read back after SIGCONT" \
	"$(dd if="$dev" bs=1M count=4 iflag=direct status=none | sha256sum)" "$(sha256sum </tmp/after.bin)"
disconnect "$nqn"
stop_target
"$DURABILITY" verify -dev /data/tcplong-kill9.img -record "$REC" || fail "read back from the backing file"
echo "$thp_was" >"$thp"
