# One reservation for both daemons of an HA pair, kept on the shared disk
# (shared_reservations): host 1 takes Write Exclusive through daemon A and
# host 2, through daemon B, is refused writes but not reads; host 2's
# Preempt and Abort through B fences host 1 through A; A cut off from
# the disk turns the namespace away within T (1 s): the host reads its
# path through A inaccessible, while B goes on serving, and optimized
# again once the disk answers; A paused past 2T (SIGSTOP) with host 1's
# writes waiting in its queues admits none of them once resumed (SIGCONT)
# after host 2's Preempt and Abort through B and host 2's write over the
# region; after kill -9 of A, B still holds the reservation; A started
# again serves it, and after A's clean stop B's change does not wait for
# A. Both daemons serve the namespace optimized, each with its slot of
# the reservation area.
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
log_end "$RESULTS/$SCENARIO-target2.log"
B_FROM=$LOG_END
"$NVMEOF_TGT" -config /tmp/b.yaml >>"$RESULTS/$SCENARIO-target2.log" 2>&1 &
TARGET2_PID=$!
start_target /tmp/a.yaml
wait_for 30 "daemon B answering discovery on $ADDR2" target_answers "$RESULTS/$SCENARIO-target2.log" "$ADDR2" "$TARGET2_PID" "$B_FROM"
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
grep -q "answers ANA Inaccessible until" "$RESULTS/$SCENARIO-target.log" ||
	fail "A did not log that it turned the namespace away"
assert_eq "A's nvmeof_tgt_reservation_unavailable while cut off" "$(metric nvmeof_tgt_reservation_unavailable 'nsid="1"')" 1
assert_eq "B's nvmeof_tgt_reservation_unavailable meanwhile" "$(metric_at "$B_METRICS" nvmeof_tgt_reservation_unavailable 'nsid="1"')" 0
ok wr "$B"
DM_DISABLE_UDEV=1 dmsetup resume ha-a || fail "resuming A's view of the disk"
wait_for 15 "host 1's path through A optimized again" ana_state_is "${A#/dev/}" 1 optimized
assert_eq "A's nvmeof_tgt_reservation_unavailable once the disk answers" "$(metric nvmeof_tgt_reservation_unavailable 'nsid="1"')" 0
echo "ok: A cut off from the disk turned its path inaccessible while B served, and optimized once the disk answered"

# A paused past 2T while host 1's writes wait in its queues. Native
# multipath off (host_multipath_off): each host writes through a block
# device of its own controller, host 1's through A and host 2's through
# B, and a write A refuses is not sent again down host 2's path. Host 1's
# keep alive timeout is 30 s rather than 5: its controller must outlive
# A's pause (2T and the steps around it, over 5 s on a loaded machine),
# or the host would reset it and take its writes back from A's queues.
echo "== A paused past 2T while host 1's writes wait in its queues (at $SECONDS s)"
nvme disconnect -d "${A#/dev/}" >/dev/null || fail "disconnect host 1"
nvme disconnect -d "${B#/dev/}" >/dev/null || fail "disconnect host 2"
host_multipath_off
# A stopped must be continued before cleanup disconnects and kills.
a_stopped="" fio_pid=""
resume_a() { [ -z "$a_stopped" ] || kill -CONT "$a_stopped" 2>/dev/null || true; a_stopped=""; }
trap 'resume_a; [ -z "$fio_pid" ] || kill -9 "$fio_pid" 2>/dev/null || true; cleanup; host_multipath_default' EXIT
A=$(connect_host "$ADDR" "$nqn" "$host1" 60 ,keep_alive_tmo=30) B=$(connect_host "$ADDR2" "$nqn" "$host2")
c1=${A#/dev/} c2=${B#/dev/}
d1=$(ctrl_ns_dev "$c1" 1) d2=$(ctrl_ns_dev "$c2" 1)
echo "host 1 through A on $A ($d1), host 2 through B on $B ($d2)"
# Host 2 releases; host 1 registers again and takes Write Exclusive.
ok nvme resv-release "$B" -n 1 --crkey=20 --rtype=1 --rrela=0
ok nvme resv-register "$A" -n 1 --nrkey=10 --rrega=0
ok nvme resv-acquire "$A" -n 1 --crkey=10 --rtype=1 --racqa=0
assert_eq "report through B before the pause" "$(resv_report "$B" | cut -d" " -f2-)" "1 2 20@bbbbbbbb,10@aaaaaaaa*"

region=131072
head -c "$region" /dev/zero | tr '\0' B >/tmp/resv-B
# The reservation area on the disk: blocks 0 and 3 the record (its
# sequence number at byte 16), block 1 A's heartbeat (slot 0: the
# sequence number of the record it enforces at byte 24). Read with
# O_DIRECT: the daemons write the disk beside its page cache.
area=$(((sectors - 2048) / 8))
area_u64() { dd if=/dev/vdb bs=4096 skip=$((area + $1)) count=1 iflag=direct status=none | od -An -t u8 -j "$2" -N 8; }
# a_scrape NAME...: the values of NAMEs on A's /metrics, one scrape: each
# one's series of the subsystem's namespace 1, or of its path errors.
# Never while A is stopped: the scrape would wait for it.
a_scrape() {
	http_get 127.0.0.1:9750 /metrics /tmp/metrics.txt || fail "scraping A's metrics"
	local m
	for m in "$@"; do
		awk -v m="$m" -v s="subsystem=\"$nqn\"" '$1 ~ "^"m"[{]" && index($1, s) &&
			(index($1, "nsid=\"1\"") || index($1, "type=\"path\"")) { print $2; exit }' /tmp/metrics.txt
	done
}
# a_enforces SEQ: A's heartbeat reports record SEQ (or a later one), and A
# serves the namespace again.
a_enforces() { [ $(area_u64 1 24) -ge "$1" ] && [ "$(a_scrape nvmeof_tgt_reservation_unavailable)" = 0 ]; }
# stopped PID: every thread of PID is stopped.
stopped() { awk '$3 != "T" { exit 1 }' /proc/"$1"/task/*/stat; }
# writes_waiting N: at least N writes of host 1 in flight on the host;
# fails once host 1's writer has ended.
writes_waiting() {
	gone "$fio_pid" && fail "host 1's writer ended before its writes waited: $(tail -5 "$RESULTS/$SCENARIO-paused.err")"
	[ "$(awk '{ print $2 }' "/sys/block/${d1#/dev/}/inflight")" -ge "$1" ]
}
idle() { [ ! -e "/sys/block/${d1#/dev/}/inflight" ] || [ "$(awk '{ print $1 + $2 }' "/sys/block/${d1#/dev/}/inflight")" = 0 ]; }
read -r -d '' a_writes0 a_path0 < <(a_scrape nvmeof_tgt_writes_completed_total nvmeof_tgt_command_errors_total) || true

kill -STOP "$TARGET_PID"
a_stopped=$TARGET_PID
wait_for 5 "daemon A stopped" stopped "$TARGET_PID"
# Host 1's writer: pattern A over the region, 128 KiB at a time, 32 in
# flight, split over the guest's CPUs (up to two) and so over the
# controller's I/O queues (one per CPU), over and over until a write
# fails, as its writes must once A resumes.
cpus=$(nproc)
[ "$cpus" -le 2 ] || cpus=2
fio --name=paused --filename="$d1" --direct=1 --ioengine=libaio --rw=write --bs="$region" --size="$region" \
	--iodepth=$((32 / cpus)) --numjobs="$cpus" --cpus_allowed=0-$((cpus - 1)) --cpus_allowed_policy=split --time_based --runtime=60 \
	--buffer_pattern=0x41 --scramble_buffers=0 --output-format=json --output="$RESULTS/$SCENARIO-paused.json" \
	2>"$RESULTS/$SCENARIO-paused.err" &
fio_pid=$!
wait_for 10 "32 of host 1's writes waiting in A's queues" writes_waiting 32
echo "A stopped (SIGSTOP) with 32 of host 1's writes in flight"
t0=$(now_ms) rc=0
out=$(nvme resv-acquire "$B" -n 1 --crkey=20 --prkey=10 --rtype=1 --racqa=2 2>&1) || rc=$?
took=$(($(now_ms) - t0))
[ "$rc" = 0 ] || fail "host 2's Preempt and Abort through B with A stopped (after $took ms): $out"
echo "host 2's Preempt and Abort through B succeeded in $took ms"
[ "$took" -ge 2000 ] || fail "host 2's Preempt and Abort completed in $took ms, before A's heartbeat could have stood still for 2T (2 s)"
dd if=/tmp/resv-B of="$d2" bs="$region" count=1 oflag=direct status=none 2>"$RESULTS/$SCENARIO.err" ||
	fail "host 2's write of B after its Preempt and Abort: $(cat "$RESULTS/$SCENARIO.err")"
s0=$(area_u64 0 16) s3=$(area_u64 3 16)
seq=$((s0 > s3 ? s0 : s3))
writes_waiting 1 || fail "host 1's writes left A's queues while A was stopped (its controller $c1 is $(cat "/sys/class/nvme/$c1/state"))"
echo "host 2 wrote B; the record is $seq; $(awk '{ print $2 }' "/sys/block/${d1#/dev/}/inflight") of host 1's writes still wait"

resume_a
t1=$(now_ms)
wait_for 60 "host 1's writer ending (its writes refused)" gone "$fio_pid"
rc=0
wait "$fio_pid" || rc=$?
fio_pid=""
[ "$rc" != 0 ] || fail "host 1's writer ran to its end after A resumed: none of its writes was refused"
echo "host 1's writer ended $(($(now_ms) - t1)) ms after SIGCONT (exit $rc): $(grep -m1 'io_u error' "$RESULTS/$SCENARIO-paused.err")"
wait_for 30 "host 1's writes ended" idle
wait_for 15 "A enforcing record $seq and serving again" a_enforces "$seq"
read -r -d '' a_writes a_path < <(a_scrape nvmeof_tgt_writes_completed_total nvmeof_tgt_command_errors_total) || true
a_did="A completed $((a_writes - a_writes0)) writes and answered $((a_path - a_path0)) commands with a path error since the pause"
echo "$(($(now_ms) - t1)) ms after SIGCONT host 1 is idle and A enforces record $seq; $a_did"
dd if="$d2" of=/tmp/resv-read bs="$region" count=1 iflag=direct status=none || fail "reading the region back through B"
cmp -s /tmp/resv-read /tmp/resv-B ||
	fail "$(tr -cd A </tmp/resv-read | wc -c) of the $region bytes hold host 1's pattern A and $(tr -cd B </tmp/resv-read | wc -c) host 2's B: A, resumed, admitted writes of host 1 that waited in its queues, after host 2's Preempt and Abort had completed ($took ms) and host 2 had written B; $a_did"
echo "ok: A paused past 2T admitted none of host 1's waiting writes once resumed: the region reads back all B (at $SECONDS s)"

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
