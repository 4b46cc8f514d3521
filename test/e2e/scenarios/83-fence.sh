# One fence: once a change of who may write to a namespace completes, no
# write admitted under the old rule lands. Each part gives host 1 the
# right to write a region of 128 KiB, has it write pattern A there with
# writes held on the target (waiting on a QoS limit, or in the backend),
# makes the change that takes that right away, then has host 2 write
# pattern B over the region; once every write of host 1 has ended, the
# region must read back all B. An A there is a write of host 1's that
# landed after the change completed and after host 2's write: a fenced
# host's stale write over data that now belongs to another (in a
# cluster, the node just fenced overwriting its successor's).
#
#  1. Host 2's Preempt and Abort of host 1, holding Write Exclusive, while
#     ~150 of host 1's writes wait on the namespace's QoS limit (10 IOPS):
#     more than the limit lets through in the time a Preempt and Abort may
#     take. Its status and time are printed.
#  2. The namespace hidden from host 1 (ctl remove namespace-host) while
#     its writes wait on the limit.
#  3. A host that dies with a write held in the backend: a block namespace
#     on a device-mapper table whose lower table is suspended; host 3,
#     holding Write Exclusive, writes there and gives its controller up
#     (its I/O timeout, then no reconnect: ctrl_loss_tmo=0). Host 2's
#     Preempt and Abort of host 3 must not report success while the write
#     is held (it could still land): it fails with a status the host may
#     retry, or waits until the table resumes; then host 2 writes B.
#
# Each host is a host NQN of this guest with a controller of its own, and
# native multipath is off so that each has its own block device per
# namespace: a write the target refuses to one is not sent again down the
# other's path. The order of events comes from the target's metrics
# (nvmeof_tgt_qos_waiting), the host's block statistics and the
# device-mapper table's writes in flight, never from sleeps. A part whose
# fence breaks prints its FAIL line and the next part still runs; the
# scenario fails at the end if any did.
daemon_only "QoS, per-host namespaces and reservations are nvmeof-tgt's"
nqn=nqn.2026-11.io.example:fence
h1=nqn.2014-08.org.nvmexpress:uuid:a1a1a1a1-0083-4000-8000-000000000001
h2=nqn.2014-08.org.nvmexpress:uuid:b2b2b2b2-0083-4000-8000-000000000002
h3=nqn.2014-08.org.nvmexpress:uuid:c3c3c3c3-0083-4000-8000-000000000003
region=131072
host_multipath_off

# Part 3's backend: fence-top, a dm-linear table over fence-low, another
# over the start of the second disk. Suspending fence-low holds the
# daemon's writes to the namespace (on fence-top) there, and fence-top
# counts them in flight, so the scenario sees a write held in the backend.
# lib.sh's cleanup resumes and removes both (fence-top first).
modprobe dm-mod || fail "modprobe dm-mod"
[ -b /dev/vdb ] || fail "no second virtio disk (/dev/vdb)"
DM_DISABLE_UDEV=1 dmsetup create fence-low --table "0 131072 linear /dev/vdb 0" || fail "dmsetup create fence-low"
SHARED_DM+=(fence-low)
DM_DISABLE_UDEV=1 dmsetup create fence-top --table "0 131072 linear /dev/mapper/fence-low 0" || fail "dmsetup create fence-top"
SHARED_DM=(fence-top "${SHARED_DM[@]}")
top_stat=/sys/block/dm-$(dmsetup info -c --noheadings -o minor fence-top | tr -d ' ')/inflight
[ -r "$top_stat" ] || fail "no $top_stat for fence-top"

serve "$nqn" "
      - {nsid: 1, backend: file, path: /data/fence1.img, size: 16MiB, qos: {iops: 10}}
      - {nsid: 2, backend: file, path: /data/fence2.img, size: 16MiB, qos: {iops: 10}, hosts: [$h1, $h2]}
      - {nsid: 3, backend: block, path: /dev/mapper/fence-top}" "$METRICS_ON"
c1=$(connect_host "$ADDR" "$nqn" "$h1")
c2=$(connect_host "$ADDR" "$nqn" "$h2")
c3=$(connect_host "$ADDR" "$nqn" "$h3" 0)
c1=${c1#/dev/} c2=${c2#/dev/} c3=${c3#/dev/}
d11=$(ctrl_ns_dev "$c1" 1) d12=$(ctrl_ns_dev "$c1" 2)
d21=$(ctrl_ns_dev "$c2" 1) d22=$(ctrl_ns_dev "$c2" 2) d23=$(ctrl_ns_dev "$c2" 3)
d33=$(ctrl_ns_dev "$c3" 3)
echo "host 1: $c1 ($d11, $d12); host 2: $c2 ($d21, $d22, $d23); host 3: $c3 ($d33)"

head -c "$region" /dev/zero | tr '\0' A >/tmp/fence-A
head -c "$region" /dev/zero | tr '\0' B >/tmp/fence-B
broken=()
# broke PART MESSAGE: the fence broke in PART; the scenario goes on.
broke() {
	echo "FAIL: part $1: $2" >&2
	broken+=("$1")
}
ok() { "$@" >/dev/null 2>"$RESULTS/$SCENARIO.err" || fail "$*: $(cat "$RESULTS/$SCENARIO.err")"; }
# report DEV: the reservation of DEV's namespace, as lib.sh's resv_report.
report() {
	nvme resv-report "$1" -n "$(cat "/sys/block/${1#/dev/}/nsid")" --eds -o json | jq -r '"\(.rtype) " +
		([.regctlext[]? | "\(.rkey)@\(.hostid | tostring | .[0:8])\(if .rcsts % 2 == 1 then "*" else "" end)"] | join(","))'
}
# status RC OUTPUT: what nvme-cli's command ended with, on one line: the
# NVMe status's name and value ("Command Interrupted (0x21)") when it
# printed one.
status() {
	local st
	[ "$1" != 0 ] || { echo success; return; }
	st=$(sed -n 's/^NVMe status: \([^:]*\):.*(\(0x[0-9a-fA-F]*\))$/\1 (\2)/p' <<<"$2" | head -1)
	echo "${st:-exit $1: $(tr '\n' ' ' <<<"$2" | sed 's/ *$//')}"
}
# waiting NSID: commands waiting on namespace NSID's QoS limit now.
waiting() { metric nvmeof_tgt_qos_waiting "nsid=\"$1\"" | awk '{ printf "%d", $1 }'; }
waiting_at_least() { gone "$fio_pid" && fail "host 1's writer ended before $2 of its writes waited: $(tail -5 "${fio_out%.json}.err")"; [ "$(waiting "$1")" -ge "$2" ]; }
waiting_none() { [ "$(waiting "$1")" = 0 ]; }
# idle DEV: the host has no request in flight on DEV (or no DEV any more).
idle() { [ ! -e "/sys/block/${1#/dev/}/inflight" ] || [ "$(awk '{ print $1 + $2 }' "/sys/block/${1#/dev/}/inflight")" = 0 ]; }
# writer_bg DEV DEPTH NAME: fio writing pattern A over the region of DEV,
# 128 KiB at a time at queue depth DEPTH from each of the guest's two CPUs
# (so that both of the controller's I/O queues fill), over and over until
# a write fails, as host 1's must once the change is made. Sets fio_pid.
writer_bg() {
	fio_out=$RESULTS/$SCENARIO-$3.json
	fio --name="$3" --filename="$1" --direct=1 --ioengine=libaio --rw=write --bs="$region" --size="$region" \
		--iodepth="$2" --numjobs=2 --cpus_allowed=0-1 --cpus_allowed_policy=split --time_based --runtime=120 \
		--buffer_pattern=0x41 --scramble_buffers=0 --output-format=json --output="$fio_out" 2>"${fio_out%.json}.err" &
	fio_pid=$!
}
# writer_done PART: wait for the writer to end, which it must once its
# writes are refused; prints its error.
writer_done() {
	local rc=0
	wait_for 60 "part $1: host 1's writer ending (its writes refused)" gone "$fio_pid"
	wait "$fio_pid" || rc=$?
	[ "$rc" != 0 ] || fail "part $1: host 1's writer ran to its end: none of its writes was refused"
	echo "host 1's writer ended (exit $rc, $(grep -c 'io_u error' "${fio_out%.json}.err") writes failed): $(grep -m1 'io_u error' "${fio_out%.json}.err")"
}
# b_written PART DEV2 DEV1 AFTER: host 2 writes B over the region of
# namespace PART through DEV2, after AFTER; then host 1's writer must end,
# nothing wait on the namespace's limit, and host 1's DEV1 go idle.
b_written() {
	dd if=/tmp/fence-B of="$2" bs="$region" count=1 oflag=direct status=none 2>"$RESULTS/$SCENARIO.err" ||
		fail "part $1: host 2's write of B after $4: $(cat "$RESULTS/$SCENARIO.err")"
	echo "host 2 wrote B"
	writer_done "$1"
	wait_for 60 "part $1: no command waiting on namespace $1's limit" waiting_none "$1"
	wait_for 60 "part $1: host 1's writes ended" idle "$3"
}
# check_b PART DEV WHAT: the region of DEV must read back all B, now that
# every write of the host fenced (host 1, or host 3 in part 3) has ended.
check_b() {
	dd if="$2" of=/tmp/fence-read bs="$region" count=1 iflag=direct status=none || fail "part $1: reading the region back through $2"
	if cmp -s /tmp/fence-read /tmp/fence-B; then
		echo "ok: part $1: the region reads back all B"
		return 0
	fi
	broke "$1" "$(tr -cd A </tmp/fence-read | wc -c) of the $region bytes hold the fenced host's pattern A and $(tr -cd B </tmp/fence-read | wc -c) host 2's B after $3: a write admitted before the change landed after it"
}

echo "== part 1 (at $SECONDS s): Preempt and Abort while host 1's writes wait on the QoS limit"
ok nvme resv-register "$d11" -n 1 --nrkey=10 --rrega=0
ok nvme resv-acquire "$d11" -n 1 --crkey=10 --rtype=1 --racqa=0
ok nvme resv-register "$d21" -n 1 --nrkey=20 --rrega=0
assert_eq "part 1: reservation" "$(report "$d21")" "1 10@a1a1a1a1*,20@b2b2b2b2"
# 160 writes at 10 IOPS take 16 s to run: the host must not time them out.
echo 120000 >"/sys/block/${d11#/dev/}/queue/io_timeout"
writer_bg "$d11" 80 part1
wait_for 60 "part 1: 140 of host 1's writes waiting on the limit" waiting_at_least 1 140
echo "$(waiting 1) of host 1's writes wait on namespace 1's limit"
t0=$(now_ms) rc=0
out=$(nvme resv-acquire "$d21" -n 1 --crkey=20 --prkey=10 --rtype=1 --racqa=2 2>&1) || rc=$?
preempt="host 2's Preempt and Abort ($(status "$rc" "$out"), $(($(now_ms) - t0)) ms)"
echo "$preempt; $(waiting 1) writes still wait on the limit"
assert_eq "part 1: reservation after the preempt" "$(report "$d21")" "1 20@b2b2b2b2*"
b_written 1 "$d21" "$d11" "its Preempt and Abort"
check_b 1 "$d21" "$preempt and host 2's write of B"

echo "== part 2 (at $SECONDS s): namespace 2 hidden from host 1 while its writes wait on the QoS limit"
writer_bg "$d12" 16 part2
wait_for 60 "part 2: 24 of host 1's writes waiting on the limit" waiting_at_least 2 24
echo "$(waiting 2) of host 1's writes wait on namespace 2's limit"
t0=$(now_ms) rc=0
out=$("$NVMEOF_TGT" ctl remove namespace-host "$nqn" 2 "$h1" 2>&1) || rc=$?
[ "$rc" = 0 ] || fail "part 2: ctl remove namespace-host: $out"
hidden="ctl remove namespace-host (returned in $(($(now_ms) - t0)) ms)"
echo "$hidden; $(waiting 2) writes still wait on the limit"
b_written 2 "$d22" "$d12" "namespace 2 was hidden from host 1"
check_b 2 "$d22" "$hidden and host 2's write of B"

echo "== part 3 (at $SECONDS s): host 3 dies with a write held in the backend"
ok nvme resv-register "$d33" -n 3 --nrkey=30 --rrega=0
ok nvme resv-acquire "$d33" -n 3 --crkey=30 --rtype=1 --racqa=0
ok nvme resv-register "$d23" -n 3 --nrkey=20 --rrega=0
assert_eq "part 3: reservation" "$(report "$d23")" "1 30@c3c3c3c3*,20@b2b2b2b2"
# held: fence-top has a write in flight.
held() { [ "$(awk '{ print $2 }' "$top_stat")" -ge 1 ]; }
# Host 3 gives its write up 2 s after sending it and tears its controller
# down, for good (ctrl_loss_tmo=0): to the target, a host that died.
echo 2000 >"/sys/block/${d33#/dev/}/queue/io_timeout"
DM_DISABLE_UDEV=1 dmsetup suspend fence-low || fail "dmsetup suspend fence-low"
dd if=/tmp/fence-A of="$d33" bs="$region" count=1 oflag=direct status=none 2>"$RESULTS/$SCENARIO-dd3.err" &
dd_pid=$!
wait_for 10 "part 3: host 3's write held in the suspended table" held
wait_for 30 "part 3: host 3's controller gone" ctrl_state_is "$c3" '^gone$'
rc=0
wait "$dd_pid" || rc=$?
echo "host 3's controller is gone, its write ended on the host (exit $rc: $(tr '\n' ' ' <"$RESULTS/$SCENARIO-dd3.err"))"
# daemon_has HOSTNQN: the daemon lists a controller of HOSTNQN.
daemon_has() {
	"$NVMEOF_TGT" ctl list -json | jq -e --arg h "$1" '[.subsystems[].controllers[]? | select(.host == $h)] | length > 0' >/dev/null
}
if poll 5 eval '! daemon_has "$h3"'; then
	echo "the daemon lists no controller of host 3"
else
	echo "the daemon still lists host 3's controller"
fi
held || fail "part 3: host 3's write left the suspended table"
echo "host 3's write is still held in the suspended table"
# The preempt in the background; /tmp/fence-p3.end gets its exit status
# and the time it ended. Given up to 3 s with the write held, then the
# table resumes; whether it ended before the resume began decides.
rm -f /tmp/fence-p3.end
t0=$(now_ms)
(
	rc=0
	nvme resv-acquire "$d23" -n 3 --crkey=20 --prkey=30 --rtype=1 --racqa=2 >/tmp/fence-p3.out 2>&1 || rc=$?
	echo "$rc $(now_ms)" >/tmp/fence-p3.end
) &
p3_pid=$!
poll 3 test -s /tmp/fence-p3.end || true
resuming=$(now_ms)
DM_DISABLE_UDEV=1 dmsetup resume fence-low || fail "dmsetup resume fence-low"
wait_for 30 "part 3: host 2's Preempt and Abort ending after the resume" test -s /tmp/fence-p3.end
wait "$p3_pid" || true
read -r p3_rc p3_end </tmp/fence-p3.end
p3="$(status "$p3_rc" "$(cat /tmp/fence-p3.out)") after $((p3_end - t0)) ms"
if [ "$p3_end" -ge "$resuming" ]; then
	echo "ok: host 2's Preempt and Abort did not end while the write was held: $p3, $((p3_end - resuming)) ms after the resume began"
elif [ "$p3_rc" = 0 ]; then
	broke 3 "host 2's Preempt and Abort of host 3 reported success after $((p3_end - t0)) ms while host 3's write was held in the suspended table, where it could still land"
elif grep -q '(0x[4-7][0-9a-fA-F]\{3\})' /tmp/fence-p3.out; then
	broke 3 "host 2's Preempt and Abort of host 3 failed with a status the host may not retry ($p3) while host 3's write was held"
else
	echo "ok: host 2's Preempt and Abort failed with a status the host may retry while the write was held: $p3"
fi
if [ "$p3_rc" != 0 ] && [ "$(report "$d23")" != "1 20@b2b2b2b2*" ]; then
	# Failed, and not done: the host retries, now that nothing is held.
	rc=0
	out=$(nvme resv-acquire "$d23" -n 3 --crkey=20 --prkey=30 --rtype=1 --racqa=2 2>&1) || rc=$?
	echo "host 2's Preempt and Abort again: $(status "$rc" "$out")"
fi
assert_eq "part 3: reservation after the preempt" "$(report "$d23")" "1 20@b2b2b2b2*"
dd if=/tmp/fence-B of="$d23" bs="$region" count=1 oflag=direct status=none 2>"$RESULTS/$SCENARIO.err" ||
	fail "part 3: host 2's write of B after its Preempt and Abort: $(cat "$RESULTS/$SCENARIO.err")"
echo "host 2 wrote B"
wait_for 30 "part 3: no write in flight on fence-top" eval '! held'
check_b 3 "$d23" "host 2's Preempt and Abort of host 3 and its write of B"

nvme disconnect -d "$c1" >/dev/null || fail "disconnect host 1"
nvme disconnect -d "$c2" >/dev/null || fail "disconnect host 2"
stop_target
echo "all parts done at $SECONDS s"
[ ${#broken[@]} = 0 ] || fail "the fence broke in part(s) ${broken[*]}: see their FAIL lines above"
