# One reservation for both daemons of an HA pair, kept on the shared disk
# (shared_reservations): host 1 takes Write Exclusive through daemon A and
# host 2, through daemon B, is refused writes but not reads; host 2's
# Preempt and Abort through B fences host 1 through A; A cut off from
# the disk turns the namespace away within T (1 s): the host reads its
# path through A inaccessible, while B goes on serving, and optimized
# again once the disk answers; after kill -9 of A, B still holds the
# reservation; A started again serves it, and after A's clean stop B's
# change does not wait for A. Both daemons serve the namespace optimized,
# each with its slot of the reservation area.
daemon_only "runs two nvmeof-tgt daemons"
nqn=nqn.2026-11.io.example:ha-resv
addr2_up
shared_disk ha-a ha-b
# Earlier scenarios wrote the disk: the reservation area starts empty.
sectors=$(cat /sys/block/vdb/size)
dd if=/dev/zero of=/dev/vdb bs=1M seek=$((sectors / 2048 - 1)) count=1 oflag=direct status=none ||
	fail "zeroing the reservation area"
subsys() {
	cat <<YAML
subsystems:
  - nqn: $nqn
    serial: HA0000089
    allow_any_host: true
    cntlid_min: $1
    cntlid_max: $2
    namespaces: [{nsid: 1, backend: block, path: $3, ana_group: 1, shared_reservations: {slot: $4}}]
YAML
}
config /tmp/a.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
ports: [{id: 1, address: $ADDR, port: $PORT, ana: {1: optimized}}]
$(subsys 1 99 /dev/mapper/ha-a 0)
CFG
config /tmp/b.yaml <<CFG
$(b_settings)
ports: [{id: 2, address: $ADDR2, port: $PORT, ana: {1: optimized}}]
$(subsys 100 199 /dev/mapper/ha-b 1)
CFG
# B starts beside A (start_target2's steps), to save the guest a start-up.
"$NVMEOF_TGT" -config /tmp/b.yaml >>"$RESULTS/$SCENARIO-target2.log" 2>&1 &
TARGET2_PID=$!
start_target /tmp/a.yaml
wait_for 30 "daemon B answering discovery on $ADDR2" target_answers "$RESULTS/$SCENARIO-target2.log" "$ADDR2" "$TARGET2_PID"
echo "daemon B up (pid $TARGET2_PID)"

host1=nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-0000-0000-0000-000000000089
host2=nqn.2014-08.org.nvmexpress:uuid:bbbbbbbb-0000-0000-0000-000000000089
A=$(connect_host "$ADDR" "$nqn" "$host1")
B=$(connect_host "$ADDR2" "$nqn" "$host2")
echo "host 1 through A on $A, host 2 through B on $B"

# The namespace is the disk less the 1 MiB reservation area.
nsze=$(nvme id-ns "$A" -n 1 -o json | jq -r .nsze)
assert_eq "namespace size in 512-byte blocks" "$nsze" $((sectors - 2048))

ok() { "$@" >/dev/null 2>"$RESULTS/$SCENARIO.err" || fail "$*: $(cat "$RESULTS/$SCENARIO.err")"; }
head -c 512 /dev/urandom >/tmp/resv-blk
wr() { nvme write "$1" -n 1 -s 0 -c 0 -z 512 -d /tmp/resv-blk; }
rd() { nvme read "$1" -n 1 -s 0 -c 0 -z 512 -d /dev/null; }

ok nvme resv-register "$A" -n 1 --nrkey=10 --rrega=0
ok nvme resv-acquire "$A" -n 1 --crkey=10 --rtype=1 --racqa=0
# Host 2 registers through B, which learned host 1's reservation from the disk.
ok nvme resv-register "$B" -n 1 --nrkey=20 --rrega=0
assert_eq "report through B" "$(resv_report "$B" | cut -d" " -f2-)" "1 2 10@aaaaaaaa*,20@bbbbbbbb"
resv_conflicts wr "$B"
ok rd "$B"
echo "ok: host 1's Write Exclusive taken through A holds through B"

ok nvme resv-acquire "$B" -n 1 --crkey=20 --prkey=10 --rtype=1 --racqa=2
assert_eq "report through A after host 2's preempt through B" "$(resv_report "$A" | cut -d" " -f2-)" "1 1 20@bbbbbbbb*"
resv_conflicts wr "$A"
echo "ok: host 2's Preempt and Abort through B fences host 1 through A"

# A cut off from the disk: its table suspended, A's reads of the
# reservation area wait. Host 1 learns it from an ANA change event and
# the ANA log, without sending I/O there.
DM_DISABLE_UDEV=1 dmsetup suspend --noflush ha-a || fail "suspending A's view of the disk"
wait_for 15 "host 1's path through A inaccessible" ana_state_is "${A#/dev/}" 1 inaccessible
grep -q "answers ANA Inaccessible until a refresh succeeds" "$RESULTS/$SCENARIO-target.log" ||
	fail "A did not log that it turned the namespace away"
assert_eq "A's nvmeof_tgt_reservation_unavailable while cut off" "$(metric nvmeof_tgt_reservation_unavailable 'nsid="1"')" 1
assert_eq "B's nvmeof_tgt_reservation_unavailable meanwhile" "$(metric_at "$B_METRICS" nvmeof_tgt_reservation_unavailable 'nsid="1"')" 0
ok wr "$B"
DM_DISABLE_UDEV=1 dmsetup resume ha-a || fail "resuming A's view of the disk"
wait_for 15 "host 1's path through A optimized again" ana_state_is "${A#/dev/}" 1 optimized
assert_eq "A's nvmeof_tgt_reservation_unavailable once the disk answers" "$(metric nvmeof_tgt_reservation_unavailable 'nsid="1"')" 0
echo "ok: A cut off from the disk turned its path inaccessible while B served, and optimized once the disk answered"

kill9_target
assert_eq "report through B after kill -9 of A" "$(resv_report "$B" | cut -d" " -f2-)" "1 1 20@bbbbbbbb*"
ok wr "$B"
resv_conflicts nvme resv-acquire "$B" -n 1 --crkey=99 --rtype=1 --racqa=0
echo "ok: the reservation holds through B with A gone"

# A again: it serves what the record holds, then stops cleanly (SIGTERM),
# and B's next change completes without waiting twice the timeout for it.
start_target /tmp/a.yaml
wait_for 30 "host 1 reconnected to A" ctrl_state_is "${A#/dev/}" '^live$'
assert_eq "report through A after its restart" "$(resv_report "$A" | cut -d" " -f2-)" "1 1 20@bbbbbbbb*"
stop_target
ok nvme resv-register "$B" -n 1 --crkey=20 --nrkey=21 --rrega=2
assert_eq "report through B after its key change" "$(resv_report "$B" | cut -d" " -f2-)" "1 1 21@bbbbbbbb*"
grep -q "the other daemon stopped serving the namespace cleanly" "$RESULTS/$SCENARIO-target2.log" ||
	fail "B's change did not learn that A stopped cleanly: $(grep -m1 'twice the timeout' "$RESULTS/$SCENARIO-target2.log")"
echo "ok: A restarted serves B's reservation, and after A's clean stop B's change did not wait for it"
nvme disconnect -d "${A#/dev/}" >/dev/null 2>&1 || true
nvme disconnect -d "${B#/dev/}" >&2 || fail "disconnect host 2"
stop_target2
