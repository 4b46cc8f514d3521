# e2e-timeout: 600
# Queue pairs coming and going with commands in flight, against the real
# Linux host and a raw one (test/rdmahost), on a small shared receive queue
# (just the Linux hosts' commands in flight) and buffer pool (4 MiB) so
# that one lost entry or buffer shows: (a) hosts disconnect with fio at
# queue depth 32 in flight, three at a time, CYCLES times; (b) controllers whose queues are destroyed without a disconnect
# right after 24 reads (and 4 Identify) are posted, ABANDONS times;
# (c) meanwhile a queue pair that never sends a Connect, which the target
# must close at its connect deadline. Then a fresh host verifies data at
# full depth, and once every queue pair is gone the daemon's threads, fds,
# RSS, registered memory, shared receive queue entries and buffer pool in
# use must be back at their starting values (threads within 64: the Go
# runtime keeps the threads its busiest moment needed, 14 more after the
# churn on 2026-11-26, where a leak of one per queue pair would be hundreds;
# RSS within 32 MiB). A metric missing from /metrics fails the scenario.
#
# The shared receive queue has an entry for every command the Linux hosts
# can have in flight, so they never meet a receiver-not-ready NAK, and one
# fails the scenario: soft-RoCE's requester, on the retry, runs again the
# memory registrations it already ran after the retried Send
# (rxe_reg_fast_mr: "mr->lkey = ... not free", then the host's queue pair
# fails or hangs; seen on guest kernels 6.1 and 6.12). A NAK with every
# entry posted back before each response means an entry went missing.
# The raw host registers its memory once, so its retries in (b) are
# harmless. CHURN_RECEIVE_QUEUE_DEPTH overrides the size (64 shows the
# failure within seconds).
#
# The soak test (test/soak/churn.sh) runs this same scenario with
# CHURN_CYCLES, CHURN_ABANDONS and CHURN_DEFAULT_CONFIG=1 (the daemon's
# default rdma settings).
daemon_only "the churn figures are nvmeof-tgt's metrics and process"
[ -x "${RDMAHOST:-}" ] || fail "RDMAHOST='${RDMAHOST:-}' is not an executable: test/e2e/e2e_test.go builds it"
nqn=nqn.2026-11.io.example:churn
vnqn=nqn.2026-11.io.example:churn-verify
# 2 cycles here (6 disconnects under load) and 150 abandoned controllers
# (a leaked thread or file per queue pair among them would be over 150);
# the soak test runs a thousand cycles.
cycles=${CHURN_CYCLES:-2}
hosts=3
abandons=${CHURN_ABANDONS:-150}
# The Linux hosts' commands in flight at most: an I/O queue per CPU, 32
# deep for the churning hosts, 128 (nvme connect's default) for the one
# that verifies.
host_entries=$(($(nproc) * (hosts * 32 > 128 ? hosts * 32 : 128)))
srq_depth=${CHURN_RECEIVE_QUEUE_DEPTH:-$host_entries}
rdma_config="rdma: {receive_queue_depth: $srq_depth, buffer_pool: 4MiB}"
[ -z "${CHURN_DEFAULT_CONFIG:-}" ] || { rdma_config="" srq_depth="the default number of"; }
config /tmp/tgt.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
$rdma_config
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
$(for h in $(seq 1 $hosts); do
	echo "  - nqn: $nqn$h"
	echo "    allow_any_host: true"
	echo "    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]"
done)
  - nqn: $vnqn
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: /data/churn.img, size: 128MiB}]
CFG
start_target /tmp/tgt.yaml
echo "churn: $((cycles * hosts)) disconnects under load, $abandons abandoned controllers, ${rdma_config:-default rdma settings}"

# --- the figures, from one scrape and /proc ---

scrape() { http_get 127.0.0.1:9750 /metrics /tmp/metrics.txt || fail "scraping /metrics"; }
# m NAME [LABEL-FILTER]: from the last scrape; empty if the series is missing.
m() {
	local v
	v=$(metric_in "$1" "${2:-}")
	[ -z "$v" ] || printf '%.0f\n' "$v"
}
reserved_is() { scrape; [ "$(m nvmeof_tgt_queue_pairs_reserved)" = "$1" ]; }
# figures FILE: one "name value" line per figure; value "missing" for a
# metric /metrics lacks.
figures() {
	local pid=$TARGET_PID name v
	scrape
	{
		echo "threads $(awk '/^Threads:/ { print $2 }' "/proc/$pid/status")"
		echo "fds $(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)"
		echo "rss_kib $(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")"
		for name in registered_memory_bytes:nvmeof_tgt_registered_memory_bytes: \
			pool_in_use_bytes:nvmeof_tgt_rdma_buffer_pool_in_use_bytes: \
			srq_io_entries:nvmeof_tgt_rdma_srq_entries:'queue="io"' \
			srq_io_posted_entries:nvmeof_tgt_rdma_srq_posted_entries:'queue="io"' \
			srq_admin_entries:nvmeof_tgt_rdma_srq_entries:'queue="admin"' \
			srq_admin_posted_entries:nvmeof_tgt_rdma_srq_posted_entries:'queue="admin"' \
			request_state_violations:nvmeof_tgt_rdma_request_state_violations_total:; do
			IFS=: read -r label metric filter <<<"$name"
			v=$(m "$metric" "$filter")
			echo "$label ${v:-missing}"
		done
	} >"$1"
}
fig() { awk -v k="$2" '$1 == k { print $2 }' "$1"; }
# rnr_naks: receiver-not-ready NAKs the RDMA devices' requesters got (the
# hosts' and the daemon's share the guest's one soft-RoCE device; the
# Linux host always has a receive posted for the daemon's responses).
rnr_naks() { cat /sys/class/infiniband/*/ports/*/hw_counters/rcvd_rnr_err | awk '{ n += $1 } END { print n + 0 }'; }
# no_rnr_since N PHASE: fails unless the count is still N.
no_rnr_since() {
	local now
	now=$(rnr_naks)
	[ "$now" = "$1" ] || fail "$2: the Linux host got $((now - $1)) receiver-not-ready NAKs with a receive queue of $srq_depth entries for its $host_entries commands (soft-RoCE fails a host's queue pair on that retry: see the top of this scenario)$(dmesg | grep -m3 'not free' | sed 's/^/; /')"
}
ls /sys/class/infiniband/*/ports/*/hw_counters/rcvd_rnr_err >/dev/null 2>&1 ||
	fail "no rcvd_rnr_err counter under /sys/class/infiniband: the scenario cannot tell a receiver-not-ready NAK"
# settled: every figure present in both is back at its start (within the
# tolerances above), and each shared receive queue has all its entries
# posted.
settled() {
	figures /tmp/churn-after.txt
	local k b a
	while read -r k b; do
		a=$(fig /tmp/churn-after.txt "$k")
		[ "$b" != missing ] && [ "$a" != missing ] || continue
		case $k in
		threads) [ "$a" -le $((b + 64)) ] || return 1 ;;
		rss_kib) [ "$a" -le $((b + 32768)) ] || return 1 ;;
		srq_*_entries) [ "$a" = "$b" ] || return 1 ;;
		*) [ "$a" = "$b" ] || return 1 ;;
		esac
	done </tmp/churn-before.txt
	for q in io admin; do
		a=$(fig /tmp/churn-after.txt "srq_${q}_posted_entries")
		[ "$a" = missing ] || [ "$a" = "$(fig /tmp/churn-after.txt "srq_${q}_entries")" ] || return 1
	done
}

# A warm-up of each kind first, so that the baseline has the threads and
# heap a first connection brings; what the churn leaks comes on top.
dev=$(connect "${nqn}1" --queue-size=32)
fio --name=warm --filename="$dev" --direct=1 --ioengine=libaio --rw=randread --bs=4k --iodepth=32 --size=8m --output=/dev/null ||
	fail "warm-up fio"
disconnect "${nqn}1"
"$RDMAHOST" abandon -addr "$ADDR" -port "$PORT" -nqn "${nqn}1" -n 4 -cmds 24 -qsize 32 || fail "warm-up abandon"
wait_for 30 "the warm-up's queue pairs gone" reserved_is 0
figures /tmp/churn-before.txt
echo "--- at the start"
cat /tmp/churn-before.txt

# --- (a) hosts disconnecting with fio at QD 32 in flight ---

# Three controllers at a time, each of its own subsystem, disconnected
# together while fio keeps 32 commands in flight on each.
start=$SECONDS
rnr0=$(rnr_naks)
inflight=0
# fio_busy CTRL N: the path has done more than N I/Os while fio still runs.
fio_busy() {
	no_rnr_since "$rnr0" "cycle $i"
	gone "$fio_pid" && fail "fio ended before the disconnect"
	path_ios_above "$1" 1 "$2"
}
# host_timeouts: I/O timeouts the host has logged: commands the target
# never answered.
host_timeouts() { dmesg | grep -cE 'nvme[0-9]+: I/O [0-9]+ QID [0-9]+ timeout' || true; }
timeouts0=$(host_timeouts)
# fio_ended: fio is gone; fails at once on a host I/O timeout, which a
# disconnect under load must never need.
fio_ended() {
	no_rnr_since "$rnr0" "cycle $i"
	[ "$(host_timeouts)" = "$timeouts0" ] ||
		fail "the host timed out commands the target never answered: $(dmesg | grep -E 'I/O [0-9]+ QID [0-9]+ timeout' | tail -3)"
	gone "$fio_pid"
}
for i in $(seq 1 "$cycles"); do
	jobs=()
	for h in $(seq 1 $hosts); do
		nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$nqn$h" --queue-size=32 >/dev/null || fail "cycle $i: nvme connect $nqn$h"
		jobs+=(--name="load$h" --filename="$(wait_dev "$nqn$h")")
	done
	fio --direct=1 --ioengine=libaio --rw=randrw --bsrange=4k-64k --iodepth=32 --time_based --runtime=120 \
		--output=/dev/null "${jobs[@]}" 2>/dev/null &
	fio_pid=$!
	for h in $(seq 1 $hosts); do
		c=$(ctrl_of "$nqn$h") || { no_rnr_since "$rnr0" "cycle $i"; fail "cycle $i: no live controller of $nqn$h"; }
		wait_for 60 "cycle $i: 64 I/Os through $c" fio_busy "$c" 64
		[ "$(path_inflight "$c" 1)" -gt 0 ] && inflight=$((inflight + 1))
	done
	pids=()
	for h in $(seq 1 $hosts); do
		nvme disconnect -n "$nqn$h" >/dev/null &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || fail "cycle $i: nvme disconnect under load"; done
	# fio's I/O fails with the controllers gone: only its end matters.
	wait_for 60 "cycle $i: fio ending after the disconnects" fio_ended
	wait "$fio_pid" || true
	wait_for 30 "cycle $i: every queue pair gone" reserved_is 0
	no_rnr_since "$rnr0" "cycle $i"
done
n=$((cycles * hosts))
echo "(a) $n disconnects under load ($cycles cycles of $hosts) in $((SECONDS - start)) s; commands in flight at $inflight of them"
[ "$inflight" -ge $((n / 2)) ] || fail "commands were in flight at only $inflight of $n disconnects"

# --- (b) abandoned controllers, (c) meanwhile a queue pair without a Connect ---

start=$SECONDS
"$RDMAHOST" noconnect -addr "$ADDR" -port "$PORT" -hold 15s >"$RESULTS/$SCENARIO-noconnect.txt" 2>&1 &
nc_pid=$!
"$RDMAHOST" abandon -addr "$ADDR" -port "$PORT" -nqn "${nqn}2" -n "$abandons" -cmds 24 -qsize 32 ||
	fail "rdmahost abandon: $(tail -5 "$RESULTS/$SCENARIO-target.log")"
wait_for 40 "the queue pair without a Connect to end" gone "$nc_pid"
wait "$nc_pid" || fail "rdmahost noconnect: $(cat "$RESULTS/$SCENARIO-noconnect.txt")"
wait_for 60 "every abandoned queue pair gone" reserved_is 0
echo "(b) $abandons controllers abandoned with commands in flight in $((SECONDS - start)) s"
scrape
echo "(c) queue pair without a Connect: $(cat "$RESULTS/$SCENARIO-noconnect.txt"); nvmeof_tgt_connect_timeouts_total: $(m nvmeof_tgt_connect_timeouts_total | grep . || echo 'not exported')"
# The target, not the client's 15 s hold, ended it, and counted it.
grep -q "closed_by_target=true" "$RESULTS/$SCENARIO-noconnect.txt" || fail "the queue pair without a Connect was not closed by the target: $(cat "$RESULTS/$SCENARIO-noconnect.txt")"
[ "$(m nvmeof_tgt_connect_timeouts_total | awk '{s += $NF} END {printf "%d", s}')" -ge 1 ] || fail "nvmeof_tgt_connect_timeouts_total did not count the queue pair without a Connect"

# --- a fresh host at full depth, with verify ---

start=$SECONDS
rnr0=$(rnr_naks)
dev=$(connect "$vnqn")
c=$(ctrl_of "$vnqn")
depth=$(($(cat "/sys/class/nvme/$c/sqsize") + 1))
fio_ok verify --filename="$dev" --direct=1 --ioengine=libaio --rw=randwrite --bsrange=4k-128k --iodepth="$depth" \
	--size=64m --verify=crc32c --do_verify=1 --verify_fatal=1
disconnect "$vnqn"
wait_for 30 "the verifying host's queue pairs gone" reserved_is 0
no_rnr_since "$rnr0" "the verifying host"
echo "fresh host: fio verify at depth $depth in $((SECONDS - start)) s; buffer pool waits $(m nvmeof_tgt_rdma_buffer_pool_waits_total)"

# --- the figures again ---

poll 30 settled || true
echo "--- at the end (start -> end)"
awk 'NR == FNR { end[$1] = $2; next } { printf "%-26s %s -> %s\n", $1, $2, end[$1] }' /tmp/churn-after.txt /tmp/churn-before.txt
# grep finds nothing when every figure is there: not an error.
missing=$({ grep -h ' missing$' /tmp/churn-before.txt /tmp/churn-after.txt || true; } | awk '{print $1}' | sort -u | tr '\n' ' ')
[ -z "$missing" ] || fail "figures missing from /metrics: $missing(nvmeof_tgt_rdma_srq_entries and nvmeof_tgt_rdma_srq_posted_entries{device,queue} are expected)"
settled || fail "the daemon did not return to its starting figures after the churn (see the table above)"
assert_eq "request state violations" "$(fig /tmp/churn-after.txt request_state_violations)" 0
echo "ok: threads, fds, RSS, registered memory, shared receive queues and buffer pool back at their start"
stop_target
