#!/bin/bash
# Inside the guest: the same fio jobs against nvmeof-tgt and against the
# Linux kernel target (nvmet-rdma), both over soft-RoCE on 10.99.0.1 and
# both backed by a null device, so the figures compare the targets alone.
#
# CPU per I/O. Around each job the script reads /proc/stat (the whole
# guest) and, for nvmeof-tgt, /proc/PID/stat (utime + stime of the process:
# every thread, pollers and backend workers included), and divides the
# deltas by the I/Os fio completed, as CPU seconds per million I/Os:
#   tgt     nvmeof-tgt's own process time; "-" for the kernel target,
#           whose work runs in softirq and kworkers and belongs to no
#           process.
#   sys     guest system + irq + softirq time. For both targets this holds
#           the host's nvme-rdma and fio's system calls as well as the
#           soft-RoCE copies and, for nvmet, all of the target: the host
#           side is the same in both runs, so the difference is the targets'.
#   busy    all guest CPU time but idle and iowait (user, nice, system, irq,
#           softirq, steal): the comparable total, since nvmeof-tgt runs
#           partly in user space and nvmet not at all.
# Soft-RoCE counters (/sys/class/infiniband/rxe0/ports/1/hw_counters) are
# read the same way and written per I/O to rxe.tsv; nvmeof-tgt's poller
# busy/asleep seconds (metrics) to poller.tsv.
#
# Idle: with a host connected and no I/O, nvmeof-tgt's utime + stime over
# BENCH_IDLE seconds (default 30; 0 skips it), as % of one core, with the
# per-thread run time from schedstat (nanoseconds, finer than the 10 ms
# ticks of /proc/PID/stat) and the wake-ups (voluntary context switches).
#
# BENCH_PERF="rw,bs,qd ..." records a system-wide cpu-clock profile with
# perf during those jobs (both targets) into LABEL-JOB.perf.txt.
set -euo pipefail
export LC_ALL=C # join needs the order the globs sort in
runtime=${BENCH_RUNTIME:-8}
idle_secs=${BENCH_IDLE:-30}
hz=$(getconf CLK_TCK)
hwc=/sys/class/infiniband/rxe0/ports/1/hw_counters
metrics=127.0.0.1:9750
read -r -a jobs <<<"${BENCH_JOBS:-}"
if [ ${#jobs[@]} -eq 0 ]; then
	jobs=("randread 4k 32" "randwrite 4k 32" "read 128k 16" "write 128k 16" "randread 4k 1")
else # BENCH_JOBS: "rw,bs,qd ..." for a subset
	for i in "${!jobs[@]}"; do jobs[$i]=${jobs[$i]//,/ }; done
fi

# guest_cpu: ticks of the whole guest, "busy system+irq+softirq".
guest_cpu() { awk '$1 == "cpu" {print $2+$3+$4+$7+$8+$9, $4+$7+$8; exit}' /proc/stat; }
# proc_cpu PID: utime + stime ticks of the process (all threads). The
# command name in field 2 may hold spaces, so count from its ")".
proc_cpu() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# thread_ns PID: run time of the process's live threads in nanoseconds.
thread_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; }
# wakeups PID: voluntary context switches of the live threads.
wakeups() { cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s}'; }
rxe_counters() { for f in "$hwc"/*; do echo "${f##*/} $(cat "$f")"; done; }
poller_secs() { # busy asleep, from the metrics endpoint
	curl -sf "http://$metrics/metrics" | awk '/^nvmeof_tgt_poller_seconds_total/ {
		if ($0 ~ /busy/) b = $2; else i = $2 } END {print b + 0, i + 0}'
}
# per_m TICKS IOS: CPU seconds per million I/Os.
per_m() { awk -v t="$1" -v n="$2" -v hz="$hz" 'BEGIN {if (n > 0) printf "%.1f", t / hz / n * 1e6; else print "-"}'; }

# fio_job LABEL RW BS QD DEV: runs one job, under perf if BENCH_PERF names it.
fio_job() {
	local label=$1 rw=$2 bs=$3 qd=$4 dev=$5 out="/results/$1-$2-$3-qd$4"
	local cmd=(fio --name=b --filename="$dev" --rw="$rw" --bs="$bs" --iodepth="$qd" --ioengine=libaio --direct=1
		--runtime="$runtime" --time_based --output-format=json --output="$out.json")
	if profiled "$rw,$bs,$qd"; then
		profile "$out" "${cmd[@]}"
	else
		"${cmd[@]}"
	fi
}

# profiled JOB: BENCH_PERF names JOB ("rw,bs,qd" or "idle").
profiled() { [[ " ${BENCH_PERF:-} " == *" $1 "* ]]; }
# profile OUT CMD...: CMD under a system-wide perf profile with call graphs,
# kept as OUT.perf.data; run.sh reports it on the build machine, whose perf
# reads the guest's symbols from /results/kallsyms.
profile() {
	local out=$1
	shift
	[ -f /results/kallsyms ] || cat /proc/kallsyms >/results/kallsyms
	perf record -q -a -g -e cpu-clock -o "$out.perf.data" -- "$@" 2>/dev/null
}

bench() { # label device [pid]
	local label=$1 dev=$2 pid=${3:-} j rw bs qd c0 c1 p0=0 p1=0 pl0 pl1 ios tgt
	for j in "${jobs[@]}"; do
		read -r rw bs qd <<<"$j"
		out="/results/$label-$rw-$bs-qd$qd"
		rxe_counters >/tmp/rxe0
		[ -z "$pid" ] || { pl0=$(poller_secs); p0=$(proc_cpu "$pid"); }
		c0=$(guest_cpu)
		fio_job "$label" "$rw" "$bs" "$qd" "$dev"
		c1=$(guest_cpu)
		[ -z "$pid" ] || { p1=$(proc_cpu "$pid"); pl1=$(poller_secs); }
		rxe_counters >/tmp/rxe1
		ios=$(jq '.jobs[0] | .read.total_ios + .write.total_ios' "$out.json")
		tgt=-
		[ -z "$pid" ] || tgt=$(per_m $((p1 - p0)) "$ios")
		read -r b0 s0 <<<"$c0"
		read -r b1 s1 <<<"$c1"
		jq -r --arg l "$label" --arg j "$rw $bs qd$qd" --arg t "$tgt" --arg s "$(per_m $((s1 - s0)) "$ios")" \
			--arg b "$(per_m $((b1 - b0)) "$ios")" \
			'.jobs[0] | [$l, $j, ((.read.iops + .write.iops) | floor), (((.read.bw + .write.bw) / 1024) | floor),
				((.read.clat_ns.mean + .write.clat_ns.mean) / 1000 | floor), $t, $s, $b] | @tsv' "$out.json" >>/results/bench.tsv
		# Soft-RoCE counters that moved, per I/O.
		join /tmp/rxe0 /tmp/rxe1 | awk -v l="$label" -v j="$rw $bs qd$qd" -v n="$ios" '
			$3 != $2 {s = s sprintf(" %s=%.2f", $1, ($3 - $2) / n)} END {print l "\t" j "\t" s}' >>/results/rxe.tsv
		[ -z "$pid" ] || awk -v l="$label" -v j="$rw $bs qd$qd" -v n="$ios" -v a="$pl0" -v b="$pl1" 'BEGIN {
			split(a, x, " "); split(b, y, " ")
			printf "%s\t%s\tbusy %.1f s/M I/O, asleep %.1f s/M I/O\n", l, j, (y[1] - x[1]) / n * 1e6, (y[2] - x[2]) / n * 1e6}' >>/results/poller.tsv
	done
}

# idle PID DEV: nvmeof-tgt's CPU with the host connected and no I/O.
idle() {
	local pid=$1 dev=$2 t0 t1 n0 n1 w0 w1 c0 c1 io0 io1
	io0=$(awk '{print $1 + $5}' "/sys/block/${dev#/dev/}/stat")
	t0=$(proc_cpu "$pid") n0=$(thread_ns "$pid") w0=$(wakeups "$pid") c0=$(guest_cpu)
	grep -H . /proc/"$pid"/task/*/schedstat >/tmp/idle-threads0
	if profiled idle; then profile /results/idle sleep "$idle_secs"; else sleep "$idle_secs"; fi
	t1=$(proc_cpu "$pid") n1=$(thread_ns "$pid") w1=$(wakeups "$pid") c1=$(guest_cpu)
	grep -H . /proc/"$pid"/task/*/schedstat >/tmp/idle-threads1
	io1=$(awk '{print $1 + $5}' "/sys/block/${dev#/dev/}/stat")
	# Per-thread run time (ms) over the window, for finding a busy one.
	# Each thread's system call and kernel wait channel tell a poller (poll
	# on its completion channel) from the Go runtime (futex, epoll_pwait).
	join -t: /tmp/idle-threads0 /tmp/idle-threads1 | while IFS=: read -r f a b; do
		t=${f%/schedstat}
		awk -v t="${t##*/}" -v a="$a" -v b="$b" -v sc="$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)" -v wc="$(cat "$t/wchan" 2>/dev/null)" 'BEGIN {
			split(a, x, " "); split(b, y, " ")
			printf "thread %s: %.3f ms in %d runs; in syscall %s, wchan %s\n", t, (y[1] - x[1]) / 1e6, y[3] - x[3], sc, wc}'
	done >/results/idle-threads.txt
	read -r b0 _ <<<"$c0"
	read -r b1 _ <<<"$c1"
	awk -v t=$((t1 - t0)) -v n=$((n1 - n0)) -v w=$((w1 - w0)) -v s="$idle_secs" -v hz="$hz" -v g=$((b1 - b0)) \
		-v io=$((io1 - io0)) -v ncpu="$(nproc)" 'BEGIN {
		printf "idle, host connected, %d s: nvmeof-tgt %.3f %% of a core (stat), %.4f %% (schedstat), %.1f wake-ups/s; guest busy %.2f %% of %d CPUs; host I/Os in the window: %d\n",
			s, t / hz / s * 100, n / 1e9 / s * 100, w / s, g / hz / s / ncpu * 100, ncpu, io}' >/results/idle.txt
}

wait_dev() {
	for _ in $(seq 100); do
		for d in /dev/nvme*n1; do [ -b "$d" ] && { echo "$d"; return; }; done
		sleep 0.1
	done
	echo "no namespace appeared" >&2
	exit 1
}

report() {
	column -t -s $'\t' /results/bench.tsv
	echo
	echo "CPU: seconds per million I/Os (tgt: nvmeof-tgt process; sys: guest system+irq+softirq; busy: all guest non-idle)"
	[ ! -f /results/idle.txt ] || cat /results/idle.txt
	echo
	echo "soft-RoCE counters per I/O:"
	column -t -s $'\t' /results/rxe.tsv
	[ ! -f /results/poller.tsv ] || { echo "nvmeof-tgt pollers:"; column -t -s $'\t' /results/poller.tsv; }
}

printf 'target\tjob\tIOPS\tMiB/s\tmean_clat_us\ttgt_cpu_s/M\tsys_cpu_s/M\tbusy_cpu_s/M\n' >/results/bench.tsv
: >/results/rxe.tsv

cat >/tmp/bench.yaml <<CFG
log: {level: warn}
metrics: {address: "$metrics"}
ports: [{id: 1, address: 10.99.0.1, port: 4420}]
subsystems:
  - nqn: nqn.2026-11.io.example:bench
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]
CFG
"$NVMEOF_TGT" -config /tmp/bench.yaml 2>/results/target.log &
pid=$!
# Up once it answers discovery (30 s at most).
for _ in $(seq 300); do
	nvme discover -t rdma -a 10.99.0.1 -s 4420 >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || { echo "nvmeof-tgt exited: $(tail -5 /results/target.log)" >&2; exit 1; }
	sleep 0.1
done
nvme connect -t rdma -a 10.99.0.1 -s 4420 -n nqn.2026-11.io.example:bench >/dev/null
dev=$(wait_dev)
[ "$idle_secs" = 0 ] || idle "$pid" "$dev"
bench nvmeof-tgt "$dev" "$pid"
nvme disconnect-all >/dev/null
kill -TERM $pid
wait $pid

[[ ${BENCH_TARGETS:-nvmeof-tgt nvmet} == *nvmet* ]] || { report; exit 0; }
# The kernel target over a 1 GiB null_blk device, as nvmeof-tgt's nullblk
# namespace above.
source "$VM_DIR/kernel-target.sh"
kt_load
kt_port 1 10.99.0.1 4420
kt_subsystem kbench
kt_namespace kbench 1 "$(kt_nullb $((1 << 30)) 512)"
kt_link 1 kbench
nvme connect -t rdma -a 10.99.0.1 -s 4420 -n kbench >/dev/null
bench nvmet "$(wait_dev)"
nvme disconnect-all >/dev/null
report
