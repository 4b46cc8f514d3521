# Per-namespace QoS: fio at QD 32 on a namespace limited to 40 IOPS runs
# at 38-42 over 10 s, and a 1 MiB/s bandwidth limit holds within 5 % the
# same way, while the subsystem's other namespace, unlimited and used by
# the same host at the same time, runs at least as fast as it did before
# the limit; a limit lowered live through ctl holds from the next second.
# The limits are low because the emulated guest is slow (a few hundred
# IOPS on a busy machine): each is checked to be well below what the
# guest does without it, measured first in the same fio run, or the test
# would prove nothing.
#
# Rates come from the host's block statistics of each namespace's path
# over a window in the middle of a fio run (the sleeps are the windows'
# length), not from fio's totals: those include its start and the
# commands that drain after its run time. Reading them is quick, where a
# scrape of the target's metrics takes seconds in a busy guest.
daemon_only "QoS limits are nvmeof-tgt's"
ctl() { "$NVMEOF_TGT" ctl "$@"; }
nqn=nqn.2026-11.io.example:qos
serve "$nqn" "[{nsid: 1, backend: nullblk, size: 1GiB}, {nsid: 2, backend: nullblk, size: 1GiB}]" "$METRICS_ON"
dev1=$(connect "$nqn")
dev2=$(wait_dev "$nqn" 2)
ctrl=$(ctrl_of "$nqn") || fail "no live controller for $nqn"
p1=/sys/class/nvme/$ctrl/$(path_of "$ctrl" 1)/stat p2=/sys/class/nvme/$ctrl/$(path_of "$ctrl" 2)/stat
echo "limited $dev1, unlimited $dev2, paths $p1 $p2"

# snap N: scrape the metrics into /tmp/qos-N.txt.
snap() {
	http_get 127.0.0.1:9750 /metrics "/tmp/qos-$1.txt" || fail "scraping /metrics"
}
# counter N METRIC NSID: METRIC of namespace NSID in snapshot N, an integer.
counter() {
	awk -v m="$2" -v f="nsid=\"$3\"" '$1 ~ "^"m"[{]" && index($1, f) { printf "%.0f", $2; exit }' "/tmp/qos-$1.txt"
}
# window SECONDS [FIELD]: per second of the block statistics' FIELD
# (default 1, reads; 3 is sectors read) of namespaces 1 and 2 over the
# next SECONDS, into R1 and R2, bytes for sectors. With LIMITED set, a
# window the guest overran by more than a second (it was not scheduled: the machine is
# busy) is measured again, 2 s later: the target's timer stalls with it,
# and makes up for a second of stall only, at once.
window() {
	local f=${2:-1} a1 a2 b1 b2 ta tb unit=1 try
	[ "$f" = 3 ] && unit=512
	for try in 1 2 3 4; do
		ta=$(now_ms) a1=$(awk -v f="$f" '{ print $f }' "$p1") a2=$(awk -v f="$f" '{ print $f }' "$p2")
		sleep "$1"
		tb=$(now_ms) b1=$(awk -v f="$f" '{ print $f }' "$p1") b2=$(awk -v f="$f" '{ print $f }' "$p2")
		[ -z "${LIMITED:-}" ] || [ $((tb - ta)) -le $(($1 * 1000 + 1000)) ] && break
		echo "the guest stalled: a $1 s window took $((tb - ta)) ms; measuring again"
		[ "$try" -lt 4 ] || fail "the guest stalled in every window: too busy to measure a rate"
		sleep 2 # past the catch-up the stall left the target (up to 1 s of the rate)
	done
	R1=$(((b1 - a1) * unit * 1000 / (tb - ta)))
	R2=$(((b2 - a2) * unit * 1000 / (tb - ta)))
	WINDOW_START=$ta
	echo "over $((tb - ta)) ms: namespace 1 $R1/s, namespace 2 $R2/s (block statistics field $f)"
}
# reads_of STAT N: the path has completed at least N reads.
reads_of() { [ "$(awk '{ print $1 }' "$1")" -ge "$2" ]; }
# queued: most of fio's 32 commands on namespace 1 wait on its limit, so
# those admitted before it was set are done.
queued() { snap c && [ "$(counter c nvmeof_tgt_qos_waiting 1)" -ge 24 ]; }
# wait_queued: for queued, showing the QoS metrics if it does not come.
wait_queued() {
	poll 30 queued || fail "fio's commands do not wait on the limit: $(grep -E '^nvmeof_tgt_(qos|reads_completed)' /tmp/qos-c.txt)"
}
# fio_bg BS: random reads at QD 32 on both namespaces, in the
# background; returns once both are reading.
fio_bg() {
	local s1 s2
	s1=$(awk '{ print $1 }' "$p1") s2=$(awk '{ print $1 }' "$p2")
	# Niced: fio at QD 32 on two namespaces takes every guest CPU, and the
	# windows' clock reads must not wait for it.
	nice -n 19 fio --output-format=json --output="$RESULTS/$SCENARIO-$1.json" --ioengine=libaio --direct=1 --rw=randread \
		--bs="$1" --iodepth=32 --time_based --runtime=120 --size=1g \
		--name=ns1 --filename="$dev1" --name=ns2 --filename="$dev2" &
	FIO_PID=$!
	wait_for 30 "fio reading namespace 1" reads_of "$p1" $((s1 + 64))
	wait_for 30 "fio reading namespace 2" reads_of "$p2" $((s2 + 64))
}
# fio_done BS: stop fio, which must still have been running (the windows
# fell inside its run): it reports on SIGINT, without errors.
fio_done() {
	kill -0 "$FIO_PID" 2>/dev/null || fail "fio ended before the measurements did"
	fio_interrupt "$FIO_PID" "$RESULTS/$SCENARIO-$1.json"
	assert_eq "fio errors" "$(jq '[.jobs[].error] | add' "$RESULTS/$SCENARIO-$1.json")" 0
}

# IOPS: unlimited first, then limited in the same run, then lowered live.
fio_bg 4k
window 3
free1=$R1 free2=$R2
[ "$free1" -ge 80 ] || fail "without a limit namespace 1 runs $free1 IOPS: not well above the 40 IOPS limit, the test would prove nothing"
ctl set namespace "$nqn" 1 -iops 40 || fail "ctl set namespace -iops 40"
# Not `ctl list | grep -q`: grep's early exit is ctl's SIGPIPE, a failure
# under pipefail.
ctl list >/tmp/qos-list.txt || fail "ctl list"
grep -q "qos iops 40" /tmp/qos-list.txt || fail "ctl list does not show the limit: $(cat /tmp/qos-list.txt)"
wait_queued
LIMITED=1
window 10
[ "$R1" -ge 38 ] && [ "$R1" -le 42 ] || fail "namespace 1 limited to 40 IOPS ran $R1"
echo "ok: namespace 1 at $R1 IOPS under a 40 IOPS limit (without: $free1)"
# The unlimited namespace gets at least what it had beside an unlimited
# one (its neighbour now takes less; 20 % for the guest's noise).
[ $((R2 * 10)) -ge $((free2 * 8)) ] || fail "the unlimited namespace ran $R2 IOPS beside the limited one, $free2 before"
echo "ok: namespace 2 at $R2 IOPS beside the limited namespace (before: $free2)"
ctl set namespace "$nqn" 1 -iops 20 || fail "ctl set namespace -iops 20"
changed=$(now_ms)
sleep 1 # the second the change has to take effect in
window 3
[ "$R1" -ge 18 ] && [ "$R1" -le 22 ] || fail "from $((WINDOW_START - changed)) ms after lowering the limit to 20 IOPS, namespace 1 ran $R1 IOPS"
echo "ok: $R1 IOPS from $((WINDOW_START - changed)) ms after the limit went from 40 to 20"
fio_done 4k
LIMITED=
snap e
[ "$(counter e nvmeof_tgt_qos_throttled_total 1)" -gt 0 ] || fail "nvmeof_tgt_qos_throttled_total of namespace 1 is 0"
assert_eq "throttled commands of the unlimited namespace" "$(counter e nvmeof_tgt_qos_throttled_total 2)" 0

# Bandwidth, the same way.
ctl set namespace "$nqn" 1 -iops 0 || fail "ctl set namespace -iops 0"
fio_bg 64k
window 3 3
free1=$R1
[ "$free1" -ge $((2 << 20)) ] || fail "without a limit namespace 1 reads $free1 B/s: not well above the 1 MiB/s limit, the test would prove nothing"
ctl set namespace "$nqn" 1 -bandwidth 1MiB || fail "ctl set namespace -bandwidth 1MiB"
wait_queued
LIMITED=1
window 10 3
[ "$R1" -ge $(((1 << 20) * 95 / 100)) ] && [ "$R1" -le $(((1 << 20) * 105 / 100)) ] ||
	fail "namespace 1 limited to 1 MiB/s read $R1 B/s"
echo "ok: namespace 1 at $R1 B/s under a 1 MiB/s limit (without: $free1)"
fio_done 64k
disconnect "$nqn"
stop_target
