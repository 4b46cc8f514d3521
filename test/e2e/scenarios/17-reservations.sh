# NVMe reservations between two hosts, as nvme-cli drives them: the
# register/replace/unregister/acquire/preempt/release/clear sequence of
# blktests nvme/054 with the extended report after each step; Write
# Exclusive held by A refusing B's write but not its read; B's Preempt and
# Abort fencing A, which finds the notification in log page 80h; and a
# reservation with PTPL surviving kill -9 of the daemon. Each host is one
# controller reached through its character device, so that every command
# goes out on that host's controller.
daemon_only "reservation state and kill -9 of the daemon"
nqn=nqn.2026-11.io.example:resv
serve_file "$nqn" /data/resv.img 16MiB
hostA=nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-0000-0000-0000-000000000001
hostB=nqn.2014-08.org.nvmexpress:uuid:bbbbbbbb-0000-0000-0000-000000000002
A=$(connect_host "$ADDR" "$nqn" "$hostA")
B=$(connect_host "$ADDR" "$nqn" "$hostB")
echo "host A on $A, host B on $B"

expect_report() { assert_eq "$1" "$(resv_report "$A")" "$2"; }
ok() { "$@" >/dev/null 2>"$RESULTS/$SCENARIO.err" || fail "$*: $(cat "$RESULTS/$SCENARIO.err")"; }
blk=/tmp/resv-blk
head -c 512 /dev/urandom >"$blk"
wr() { nvme write "$1" -n 1 -s 0 -c 0 -z 512 -d "$blk"; }
rd() { nvme read "$1" -n 1 -s 0 -c 0 -z 512 -d /dev/null; }

# The blktests nvme/054 sequence, from both hosts.
expect_report "empty" "0 0 0 "
ok nvme resv-register "$A" -n 1 --nrkey=1 --rrega=0
expect_report "A registered" "1 0 1 1@aaaaaaaa"
ok nvme resv-register "$A" -n 1 --crkey=1 --nrkey=2 --rrega=2
expect_report "A replaced its key" "2 0 1 2@aaaaaaaa"
ok nvme resv-register "$A" -n 1 --crkey=2 --rrega=1
expect_report "A unregistered" "3 0 0 "
ok nvme resv-register "$A" -n 1 --nrkey=10 --rrega=0
ok nvme resv-register "$B" -n 1 --nrkey=20 --rrega=0
ok nvme resv-acquire "$A" -n 1 --crkey=10 --rtype=1 --racqa=0
expect_report "A holds Write Exclusive" "5 1 2 10@aaaaaaaa*,20@bbbbbbbb"
resv_conflicts wr "$B"
ok rd "$B"
ok wr "$A"
echo "ok: under A's Write Exclusive, B reads and A writes"
ok nvme resv-acquire "$B" -n 1 --crkey=20 --prkey=10 --rtype=1 --racqa=1
expect_report "B preempted A" "6 1 1 20@bbbbbbbb*"
resv_conflicts wr "$A"
ok nvme resv-release "$B" -n 1 --crkey=20 --rtype=1 --rrela=0
expect_report "B released" "6 0 1 20@bbbbbbbb"
ok nvme resv-register "$A" -n 1 --nrkey=10 --rrega=0
ok nvme resv-release "$B" -n 1 --crkey=20 --rrela=1
expect_report "B cleared" "8 0 0 "
# Drop the notifications so far (A's preemption, the clear).
while [ "$(nvme get-log "$A" --log-id=0x80 --log-len=64 -b | od -An -tu1 -j8 -N1 | tr -d ' ')" != 0 ]; do :; done

# Preempt and Abort: A held the reservation and wrote; B fences it.
ok nvme resv-register "$A" -n 1 --nrkey=10 --rrega=0
ok nvme resv-register "$B" -n 1 --nrkey=20 --rrega=0
ok nvme resv-acquire "$A" -n 1 --crkey=10 --rtype=1 --racqa=0
ok wr "$A"
ok nvme resv-acquire "$B" -n 1 --crkey=20 --prkey=10 --rtype=1 --racqa=2
resv_conflicts wr "$A"
log=$(nvme get-log "$A" --log-id=0x80 --log-len=64 -b | od -An -tu1 -N16 | tr -s ' ')
read -r -a b <<<"$log"
assert_eq "A's notification type (1: registration preempted)" "${b[8]}" 1
assert_eq "A's notification namespace" "${b[12]}" 1

# PTPL: set through Register, then kill -9 and restart the daemon.
ok nvme resv-register "$B" -n 1 --crkey=20 --nrkey=21 --rrega=2 --cptpl=3
before=$(resv_report "$B")
kill -9 "$TARGET_PID"
wait "$TARGET_PID" 2>/dev/null || true
TARGET_PID=""
start_target /tmp/tgt.yaml
for c in "$A" "$B"; do
	wait_for 30 "$c reconnecting" ctrl_state_is "$(basename "$c")" '^live$'
done
assert_eq "report after kill -9 and restart" "$(resv_report "$B")" "$before"
resv_conflicts wr "$A"
ok nvme resv-register "$B" -n 1 --crkey=21 --rrega=1 --cptpl=2
nvme disconnect -n "$nqn" >/dev/null || fail "disconnect"
stop_target
