#!/bin/bash
# Inside the guest: the same fio jobs against nvmeof-tgt and against the
# Linux kernel target (nvmet-rdma), both over soft-RoCE on 10.99.0.1 and
# both backed by a null device, so the figures compare the targets alone.
# BENCH_TRANSPORT=tcp runs them over NVMe/TCP instead (the host's nvme-tcp,
# nvmet-tcp), on the same address and ports.
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
# busy/asleep seconds (metrics) to poller.tsv; the guest's context
# switches and interrupts between its CPUs to sched.tsv.
#
# Idle: with a host connected and no I/O, nvmeof-tgt's utime + stime over
# BENCH_IDLE seconds (default 30; 0 skips it), as % of one core, with the
# per-thread run time from schedstat (nanoseconds, finer than the 10 ms
# ticks of /proc/PID/stat) and the wake-ups (voluntary context switches).
#
# BENCH_PERF="rw,bs,qd ..." records a system-wide cpu-clock profile with
# perf during those jobs (both targets) into LABEL-JOB.perf.txt.
#
# BENCH_SYSCALLS="rw,bs,qd ..." counts nvmeof-tgt's system calls during
# those jobs (first round), by name, per I/O, into syscalls.tsv: perf stat
# on the syscall tracepoints of the process's threads. Tracing slows every
# system call of the guest, so that round's figures are off: count in a
# run of its own (BENCH_ROUNDS=1).
#
# The link (BENCH_TRANSPORT=tcp). Each round also measures what user space gets from the
# guest's own TCP on the address the host uses, between two processes:
# sockperf ping-pong at 64 B and 4 KiB (mean one-way latency: half a round
# trip) and iperf3 streams of 4 KiB and 128 KiB writes. The report gives
# each job's ratio to it: a QD1 job's mean completion latency to a command
# out and its data back (the 64 B one-way plus the 4 KiB one-way
# latency), a 128 KiB job's throughput to the 128 KiB stream's, and a
# 4 KiB job's to the 4 KiB stream's. It is what a user-space target's
# floor is here: the kernel target, in softirq, pays no user-space
# round trip.
#
# Interleaving. Both targets serve at once (nvmeof-tgt on port 4420, nvmet
# on 4421, each with its host connected), and every job runs BENCH_ROUNDS
# times (default 3) on each, alternating which goes first (ABBA), so that
# a change in the load of the machine running the guest falls on both
# alike. The summary gives, per job, the median of each figure and the
# median of the per-round ratios.
set -euo pipefail
export LC_ALL=C # join needs the order the globs sort in
transport=${BENCH_TRANSPORT:-rdma}
# BENCH_TLS=1 (NVMe/TCP, guest kernel 6.12): both targets require TLS 1.3,
# the host's handshakes made by tlshd with PSKs in the .nvme key ring;
# BENCH_TLS=both runs every job in clear, then with TLS, in the same boot,
# and reports what TLS costs each target.
tls=${BENCH_TLS:-}
runtime=${BENCH_RUNTIME:-8}
idle_secs=${BENCH_IDLE:-30}
rounds=${BENCH_ROUNDS:-3}
hz=$(getconf CLK_TCK)
hwc=/sys/class/infiniband/rxe0/ports/1/hw_counters
metrics=127.0.0.1:9750
read -r -a jobs <<<"${BENCH_JOBS:-}"
if [ ${#jobs[@]} -eq 0 ]; then
	jobs=("randread 4k 32" "randwrite 4k 32" "read 128k 16" "write 128k 16" "randread 4k 1")
else # BENCH_JOBS: "rw,bs,qd ..." for a subset
	for i in "${!jobs[@]}"; do jobs[$i]=${jobs[$i]//,/ }; done
fi

# awk_med: med(a, n), the median of a[1..n], for the awk programs below.
awk_med='function med(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}'

# guest_cpu: ticks of the whole guest, "busy system+irq+softirq".
guest_cpu() { awk '$1 == "cpu" {print $2+$3+$4+$7+$8+$9, $4+$7+$8; exit}' /proc/stat; }
# proc_cpu PID: utime + stime ticks of the process (all threads). The
# command name in field 2 may hold spaces, so count from its ")".
proc_cpu() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# thread_ns PID: run time of the process's live threads in nanoseconds.
thread_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; }
# wakeups PID: voluntary context switches of the live threads.
wakeups() { cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s}'; }
rxe_counters() {
	[ "$transport" = rdma ] || return 0 # soft-RoCE carries nothing of NVMe/TCP
	for f in "$hwc"/*; do echo "${f##*/} $(cat "$f")"; done
}
# sched_counters: the guest's context switches and the interrupts one CPU
# sends another (rescheduling, function calls, TLB shootdowns), summed
# over the CPUs: what a target costs in switching beside its CPU time.
sched_counters() {
	awk '$1 == "ctxt" {print "ctxt", $2}' /proc/stat
	awk '$1 == "RES:" || $1 == "CAL:" || $1 == "TLB:" {
		s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i
		print tolower(substr($1, 1, 3)) "_ipi", s }' /proc/interrupts
}
# moved_per_io BEFORE AFTER LABEL JOB IOS: the counters ("name value"
# lines, sorted) that moved between the two files, per I/O, on one line.
moved_per_io() {
	join "$1" "$2" | awk -v l="$3" -v j="$4" -v n="$5" '
		$3 != $2 {s = s sprintf(" %s=%.2f", $1, ($3 - $2) / n)} END {print l "\t" j "\t" s}'
}
poller_secs() { # busy asleep, from the metrics endpoint
	curl -sf "http://$metrics/metrics" | awk '/^nvmeof_tgt_poller_seconds_total/ {
		if ($0 ~ /busy/) b = $2; else i = $2 } END {print b + 0, i + 0}'
}
# per_m TICKS IOS: CPU seconds per million I/Os.
per_m() { awk -v t="$1" -v n="$2" -v hz="$hz" 'BEGIN {if (n > 0) printf "%.1f", t / hz / n * 1e6; else print "-"}'; }

# fio_job PID RW BS QD DEV OUT: runs one job, under perf if BENCH_PERF
# names it, with nvmeof-tgt's (PID) system calls counted if BENCH_SYSCALLS
# does (its first round only).
fio_job() {
	local pid=$1 rw=$2 bs=$3 qd=$4 dev=$5 out=$6
	local cmd=(fio --name=b --filename="$dev" --rw="$rw" --bs="$bs" --iodepth="$qd" --ioengine=libaio --direct=1
		--runtime="$runtime" --time_based --output-format=json --output="$out.json")
	if profiled "$rw,$bs,$qd" && [[ $out == *-r1 ]]; then
		profile "$out" "${cmd[@]}"
	elif [ -n "$pid" ] && counted "$rw,$bs,$qd" && [[ $out == *-r1 ]]; then
		count_syscalls "$pid" "$dev" "$out" "${cmd[@]}"
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

# dev_ios DEV: reads and writes DEV completed, from its stat.
dev_ios() { awk '{print $1 + $5}' "/sys/block/${1#/dev/}/stat"; }
# counted JOB: BENCH_SYSCALLS names JOB ("rw,bs,qd").
counted() { [[ " ${BENCH_SYSCALLS:-} " == *" $1 "* ]]; }
# count_syscalls PID DEV OUT CMD...: CMD with the system calls of PID's
# threads counted (all, and those a poller or the Go runtime makes, by
# name), kept as OUT.syscalls, and the I/Os DEV completed meanwhile as
# OUT.ios. The tracepoints need tracefs. perf takes seconds to set up
# here: it starts disabled and counts from its acknowledged "enable" to
# its "disable", just around CMD.
count_syscalls() {
	local pid=$1 dev=$2 out=$3 stat ev=raw_syscalls:sys_enter n ctl ack reply io0 io1
	shift 3
	mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
	for n in read write readv writev poll ppoll futex epoll_pwait nanosleep sched_yield io_uring_enter getrusage tgkill; do
		ev+=,syscalls:sys_enter_$n
	done
	rm -f /tmp/perf-ctl /tmp/perf-ack
	mkfifo /tmp/perf-ctl /tmp/perf-ack
	perf stat -x, -o "$out.syscalls" -p "$pid" -e "$ev" -D -1 --control fifo:/tmp/perf-ctl,/tmp/perf-ack >/dev/null 2>&1 &
	stat=$!
	exec {ctl}>/tmp/perf-ctl {ack}</tmp/perf-ack
	echo enable >&"$ctl"
	read -r -u "$ack" reply
	io0=$(dev_ios "$dev")
	"$@"
	io1=$(dev_ios "$dev")
	echo disable >&"$ctl"
	read -r -u "$ack" reply
	echo $((io1 - io0)) >"$out.ios"
	exec {ctl}>&- {ack}<&-
	kill -INT "$stat"
	wait "$stat" || true
}

# run_job LABEL DEVICE PID ROUND RW BS QD: one fio job on one target, with
# its CPU, soft-RoCE and (nvmeof-tgt) poller figures; PID empty for nvmet.
run_job() {
	local label=$1 dev=$2 pid=$3 round=$4 rw=$5 bs=$6 qd=$7 c0 c1 p0=0 p1=0 pl0 pl1 ios tgt
	local out="/results/$label-$rw-$bs-qd$qd-r$round" j="$rw $bs qd$qd"
	rxe_counters >/tmp/rxe0
	sched_counters | sort >/tmp/sched0
	[ -z "$pid" ] || { pl0=$(poller_secs); p0=$(proc_cpu "$pid"); }
	c0=$(guest_cpu)
	fio_job "$pid" "$rw" "$bs" "$qd" "$dev" "$out"
	c1=$(guest_cpu)
	[ -z "$pid" ] || { p1=$(proc_cpu "$pid"); pl1=$(poller_secs); }
	rxe_counters >/tmp/rxe1
	sched_counters | sort >/tmp/sched1
	ios=$(jq '.jobs[0] | .read.total_ios + .write.total_ios' "$out.json")
	# perf stat -x, lines: count,unit,event,...; the ones that moved, per I/O.
	# Per I/O of the counted window; of the job where the block device
	# keeps no count (6.1's multipath node).
	[ ! -f "$out.syscalls" ] || awk -F, -v l="$label" -v j="$j" -v n="$(cat "$out.ios")" -v all="$ios" '
		NR == 1 && n == 0 {n = all}
		$1 ~ /^[0-9]+$/ && $1 > 0 {e = $3; sub(/.*:(sys_enter_)?/, "", e); s = s sprintf(" %s=%.2f", e, $1 / n)}
		END {print l "\t" j "\t" s}' "$out.syscalls" >>/results/syscalls.tsv
	tgt=-
	[ -z "$pid" ] || tgt=$(per_m $((p1 - p0)) "$ios")
	read -r b0 s0 <<<"$c0"
	read -r b1 s1 <<<"$c1"
	jq -r --arg l "$label" --arg j "$j" --arg r "$round" --arg t "$tgt" --arg s "$(per_m $((s1 - s0)) "$ios")" \
		--arg b "$(per_m $((b1 - b0)) "$ios")" \
		'.jobs[0] | [$l, $j, $r, ((.read.iops + .write.iops) | floor), (((.read.bw + .write.bw) / 1024) | floor),
			((.read.clat_ns.mean + .write.clat_ns.mean) / 1000 | floor), $t, $s, $b] | @tsv' "$out.json" >>/results/rounds.tsv
	# The 99th percentile of completion latency, µs (of reads or writes,
	# whichever the job did).
	jq -r --arg l "$label" --arg j "$j" --arg r "$round" '.jobs[0] |
		[$l, $j, $r, (([.read, .write] | map(select(.total_ios > 0) | .clat_ns.percentile["99.000000"]) | max // 0) / 1000 | floor)] | @tsv' \
		"$out.json" >>/results/p99.tsv
	moved_per_io /tmp/rxe0 /tmp/rxe1 "$label" "$j r$round" "$ios" >>/results/rxe.tsv
	moved_per_io /tmp/sched0 /tmp/sched1 "$label" "$j r$round" "$ios" >>/results/sched.tsv
	[ -z "$pid" ] || [ "$transport" != rdma ] || awk -v l="$label" -v j="$j r$round" -v n="$ios" -v a="$pl0" -v b="$pl1" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		printf "%s\t%s\tbusy %.1f s/M I/O, asleep %.1f s/M I/O\n", l, j, (y[1] - x[1]) / n * 1e6, (y[2] - x[2]) / n * 1e6}' >>/results/poller.tsv
}

# idle PID DEV: nvmeof-tgt's CPU with the host connected and no I/O.
idle() {
	local pid=$1 dev=$2 t0 t1 n0 n1 w0 w1 c0 c1 io0 io1
	io0=$(dev_ios "$dev")
	t0=$(proc_cpu "$pid") n0=$(thread_ns "$pid") w0=$(wakeups "$pid") c0=$(guest_cpu)
	grep -H . /proc/"$pid"/task/*/schedstat >/tmp/idle-threads0
	if profiled idle; then profile /results/idle sleep "$idle_secs"; else sleep "$idle_secs"; fi
	t1=$(proc_cpu "$pid") n1=$(thread_ns "$pid") w1=$(wakeups "$pid") c1=$(guest_cpu)
	grep -H . /proc/"$pid"/task/*/schedstat >/tmp/idle-threads1
	io1=$(dev_ios "$dev")
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

# link ROUND: the link's figures (see the top), as lines "ROUND\tWHAT\tVALUE"
# in /results/link.tsv: one-way latency in µs, streams in MiB/s.
link() {
	local r=$1 m l bw
	for m in 64 4096; do
		l=$(sockperf ping-pong -i 10.99.0.1 -p 11111 --tcp -m "$m" -t 3 2>&1 | sed -n 's/.*avg-latency= *\([0-9.]*\).*/\1/p' | tail -1)
		printf '%s\tping-pong %s B, one way (us)\t%s\n' "$r" "$m" "${l:--}" >>/results/link.tsv
	done
	for m in 4K 128K; do
		bw=$(iperf3 -c 10.99.0.1 -p 5201 -l "$m" -t 3 -J 2>/dev/null | jq '.end.sum_received.bits_per_second / 8 / 1048576 | floor' 2>/dev/null || echo -)
		printf '%s\tstream %s writes (MiB/s)\t%s\n' "$r" "$m" "${bw:--}" >>/results/link.tsv
	done
}

# link_report: the link's medians, then each job's median ratio to it.
link_report() {
	[ -s /results/link.tsv ] || return 0
	echo "the link (user-space TCP on 10.99.0.1, medians over $rounds rounds):"
	awk -F'\t' '{v[$2] = v[$2] " " $3} END {for (k in v) print k "\t" v[k]}' /results/link.tsv | sort | while IFS=$'\t' read -r what vals; do
		printf '  %-34s %s  (rounds:%s)\n' "$what" "$(printf '%s\n' $vals | sort -n | awk '{a[NR] = $1} END {print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')" "$vals"
	done
	echo "per job, median ratio to the link (QD1: mean latency / (64 B + 4 KiB one way); 4 KiB and 128 KiB: MiB/s / the stream's):"
	awk -F'\t' "$awk_med"'
		FILENAME ~ /link/ { lk[$1, $2] = $3; next }
		{
			split($2, f, " ")
			if (f[3] == "qd1") base = lk[$3, "ping-pong 64 B, one way (us)"] + lk[$3, "ping-pong 4096 B, one way (us)"]
			else if (f[2] == "128k") base = lk[$3, "stream 128K writes (MiB/s)"]
			else base = lk[$3, "stream 4K writes (MiB/s)"]
			if (base + 0 <= 0) next
			v = f[3] == "qd1" ? $6 / base : $5 / base
			key = $1 "\t" $2
			if (!(key in n)) order[++no] = key
			r[key, ++n[key]] = v
		}
		END {
			for (x = 1; x <= no; x++) {
				k = order[x]; delete a
				for (i = 1; i <= n[k]; i++) a[i] = r[k, i]
				split(k, kk, "\t")
				printf "  %-11s %-18s %.2f\n", kk[1], kk[2], med(a, n[k])
			}
		}' /results/link.tsv /results/rounds.tsv
}

# wait_dev NQN: the block device of NQN's namespace 1, once it appears.
# tls_setup (BENCH_TLS): tlshd running, and the TLS PSKs of both targets'
# subsystems in the .nvme key ring under their version 0 identities: for
# ours, the one libnvme 1.16.2 derives from tls_key for tls_host (package
# tlspsk's known answers, whose subsystem the bench's becomes); for the
# Linux target, which reads the key ring through tlshd as the host does,
# another of those answers.
tls_setup() {
	[ "$transport" = tcp ] || { echo "BENCH_TLS needs BENCH_TRANSPORT=tcp" >&2; exit 1; }
	local tlshd=${NVMEOF_TEST_CACHE:-/var/cache/nvmeof-tgt-test}/tlshd/usr/sbin/tlshd ring
	[ -x "$tlshd" ] || { echo "no tlshd at $tlshd: run test/install-deps.sh" >&2; exit 1; }
	modprobe tls && modprobe nvme-keyring
	sub=nqn.2024-06.io.example:tank.vol7 ksub=nqn.psk-test-subsys
	tls_host=nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 tls_khost=nqn.psk-test-host
	tls_key=NVMeTLSkey-1:01:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:
	printf '[authenticate]\nkeyrings=.nvme\n' >/tmp/tlshd.conf
	"$tlshd" -c /tmp/tlshd.conf >/results/tlshd.log 2>&1 &
	ring=$((16#$(awk '$9 == ".nvme:" { print $1 }' /proc/keys)))
	printf aba76ec8224025d55200ee10a82fc77250f3dabec272b8c36b676c453c50117f | xxd -r -p |
		keyctl padd psk "NVMe0R01 $tls_host $sub" "$ring" >/dev/null
	printf 05c6503551ad136e6ee32e6eeb3f6d500b69701d84ec71e328f65c7f51566f68 | xxd -r -p |
		keyctl padd psk "NVMe0R01 $tls_khost $ksub" "$ring" >/dev/null
}

# bench_connect PORT NQN [HOSTNQN]: nvme connect, or with TLS (HOSTNQN
# set) the options written to /dev/nvme-fabrics: Debian 12's nvme-cli has
# no --tls.
bench_connect() {
	if [ -z "${3:-}" ]; then
		nvme connect -t "$transport" -a 10.99.0.1 -s "$1" -n "$2" >/dev/null
		return
	fi
	local line
	exec 3<>/dev/nvme-fabrics
	# A host ID of its own for each host NQN: the kernel refuses one ID
	# under two NQNs.
	local id=${3##*uuid:}
	[ "$id" != "$3" ] || id=7e57e57e-0000-4000-8000-$(printf '%s' "$3" | md5sum | cut -c1-12)
	printf 'transport=tcp,traddr=10.99.0.1,trsvcid=%s,nqn=%s,hostnqn=%s,hostid=%s,tls' "$1" "$2" "$3" "$id" >&3 && read -r line <&3
	exec 3>&-
	[[ $line == *instance=* ]] || { echo "TLS connect to $1 failed: $line $(tail -3 /results/tlshd.log)" >&2; exit 1; }
}

wait_dev() {
	local s d
	for _ in $(seq 100); do
		for s in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
			[ "$(cat "$s/subsysnqn" 2>/dev/null)" = "$1" ] || continue
			for d in "$s"/nvme*n1; do [ -b "/dev/${d##*/}" ] && { echo "/dev/${d##*/}"; return; }; done
		done
		sleep 0.1
	done
	echo "no namespace of $1 appeared" >&2
	exit 1
}

# summary: per target and job the median of each figure over the rounds,
# then per job the median of the per-round ratios (ours / nvmet).
summary() {
	sort -t$'\t' -k1,1 -k2,2 -k3,3n /results/rounds.tsv | awk -F'\t' "$awk_med"'
		function flush(   k, v, n) {
			if (key == "") return
			line = key
			for (k = 4; k <= 9; k++) {
				n = 0; delete v
				for (i = 1; i <= cnt; i++) { split(rows[i], f, "\t"); if (f[k] != "-") v[++n] = f[k] }
				line = line "\t" (n ? sprintf(k <= 6 ? "%d" : "%.1f", med(v, n)) : "-")
			}
			print line
			cnt = 0
		}
		{ k = $1 "\t" $2; if (k != key) { flush(); key = k } rows[++cnt] = $0 }
		END { flush() }' >/results/bench-median.tsv
	{
		printf 'target\tjob\tIOPS\tMiB/s\tmean_clat_us\ttgt_cpu_s/M\tsys_cpu_s/M\tbusy_cpu_s/M\n'
		cat /results/bench-median.tsv
	} | column -t -s $'\t'
	echo
	echo "per job, median over $rounds rounds of ours / nvmet:"
	awk -F'\t' "$awk_med"'
		{ iops[$1, $2, $3] = $4; lat[$1, $2, $3] = $6; if (!($2 in seen)) { seen[$2] = 1; order[++nj] = $2 } if ($3 > nr) nr = $3 }
		END {
			for (x = 1; x <= nj; x++) {
				j = order[x]; n = 0; delete ri; delete rl
				for (r = 1; r <= nr; r++) if (("nvmet", j, r) in iops && ("nvmeof-tgt", j, r) in iops && iops["nvmet", j, r] > 0) {
					n++; ri[n] = iops["nvmeof-tgt", j, r] / iops["nvmet", j, r]; rl[n] = lat["nvmeof-tgt", j, r] / lat["nvmet", j, r]
					s = s sprintf(" %.2f", ri[n])
				}
				if (n) printf "  %-18s IOPS ratio %.2f (rounds:%s), mean latency ratio %.2f\n", j, med(ri, n), s, med(rl, n)
				s = ""
			}
		}' /results/rounds.tsv
}

report() {
	echo "transport: $transport, guest kernel $(uname -r)"
	summary
	echo
	echo "99th percentile of completion latency (us), median over the rounds:"
	sort -t$'\t' -k1,1 -k2,2 /results/p99.tsv | awk -F'\t' '
		function flush(   i, j, t) {
			if (key == "") return
			for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
			split(key, k, SUBSEP); printf "  %-11s %-18s %d\n", k[1], k[2], n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
			n = 0; delete v
		}
		{ kk = $1 SUBSEP $2; if (kk != key) { flush(); key = kk } v[++n] = $4 + 0 }
		END { flush() }'
	echo
	link_report
	echo
	echo "CPU: seconds per million I/Os (tgt: nvmeof-tgt process; sys: guest system+irq+softirq; busy: all guest non-idle)"
	[ ! -f /results/idle.txt ] || cat /results/idle.txt
	echo
	if [ "$transport" = rdma ]; then
		echo "soft-RoCE counters per I/O:"
		column -t -s $'\t' /results/rxe.tsv
	fi
	echo "context switches and interrupts between CPUs per I/O, the whole guest:"
	column -t -s $'\t' /results/sched.tsv
	[ ! -f /results/poller.tsv ] || { echo "nvmeof-tgt pollers:"; column -t -s $'\t' /results/poller.tsv; }
	[ ! -f /results/syscalls.tsv ] || { echo "nvmeof-tgt system calls per I/O (sys_enter: all of them):"; column -t -s $'\t' /results/syscalls.tsv; }
}

# bench_pass: both targets up (with TLS 1.3 required when tls is set),
# every round of every job, both down, and the report.
bench_pass() {
	: >/results/rounds.tsv
	: >/results/rxe.tsv
	: >/results/sched.tsv
	: >/results/link.tsv
	: >/results/p99.tsv

	sub=nqn.2026-11.io.example:bench ksub=kbench
	port_tls="" hosts="allow_any_host: true"
	if [ -n "$tls" ]; then
		tls_setup
		port_tls=", tls: required"
		hosts="hosts: [{nqn: $tls_host, tls_key: \"$tls_key\"}]"
	fi
	cat >/tmp/bench.yaml <<-CFG
	log: {level: warn}
	metrics: {address: "$metrics"}
	ports: [{id: 1, transport: $transport, address: 10.99.0.1, port: 4420$port_tls}]
	subsystems:
	  - nqn: $sub
	    $hosts
	    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]
	CFG
	if [ "$transport" = tcp ]; then
		modprobe nvme-tcp
		# Host and target share this kernel: hardened usercopy on 6.1 refuses
		# our read(2) of the host's zero-copy sends across two transparent huge
		# pages (see e2e 24). Off for both targets alike.
		echo never >/sys/kernel/mm/transparent_hugepage/enabled
	fi
	"$NVMEOF_TGT" -config /tmp/bench.yaml 2>/results/target.log &
	pid=$!
	# Up once it answers discovery (30 s at most).
	for _ in $(seq 300); do
		if [ -n "$tls" ]; then # discovery in clear is refused there
			ss -ltn | grep -q '10.99.0.1:4420 ' && break
		else
			nvme discover -t "$transport" -a 10.99.0.1 -s 4420 >/dev/null 2>&1 && break
		fi
		kill -0 "$pid" 2>/dev/null || { echo "nvmeof-tgt exited: $(tail -5 /results/target.log)" >&2; exit 1; }
		sleep 0.1
	done
	bench_connect 4420 "$sub" "${tls_host:-}"
	ours=$(wait_dev "$sub")
	[ "$idle_secs" = 0 ] || idle "$pid" "$ours"

	theirs=""
	if [[ ${BENCH_TARGETS:-nvmeof-tgt nvmet} == *nvmet* ]]; then
		# The kernel target over a 1 GiB null_blk device, as nvmeof-tgt's
		# nullblk namespace above, on the next port of the same address.
		source "$VM_DIR/kernel-target.sh"
		export KT_TRTYPE=$transport
		kt_load
		kt_port 1 10.99.0.1 4421
		if [ -n "$tls" ]; then
			echo tls1.3 >"$KT_CFS/ports/1/addr_tsas"
			echo required >"$KT_CFS/ports/1/addr_treq"
		fi
		kt_subsystem "$ksub"
		kt_namespace "$ksub" 1 "$(kt_nullb $((1 << 30)) 512)"
		kt_link 1 "$ksub"
		bench_connect 4421 "$ksub" "${tls_khost:-}"
		theirs=$(wait_dev "$ksub")
	fi
	measure_link=""
	if [ "$transport" != tcp ]; then
		: # the user-space TCP link is NVMe/TCP's floor, not soft-RoCE's
	elif [ -n "${link_up:-}" ]; then
		measure_link=1
	elif command -v sockperf >/dev/null && command -v iperf3 >/dev/null; then
		link_up=1
		sockperf server -i 10.99.0.1 -p 11111 --tcp >/dev/null 2>&1 &
		iperf3 -s -B 10.99.0.1 -p 5201 >/dev/null 2>&1 &
		measure_link=1
		for _ in $(seq 50); do # until both listen
			ss -ltn | grep -q ':11111 ' && ss -ltn | grep -q ':5201 ' && break
			sleep 0.1
		done
	else
		echo "sockperf or iperf3 missing: no link figures (run.sh installs them)" >&2
	fi
	for r in $(seq 1 "$rounds"); do
		[ -z "$measure_link" ] || link "$r"
		for j in "${jobs[@]}"; do
			read -r rw bs qd <<<"$j"
			if [ -z "$theirs" ]; then
				run_job nvmeof-tgt "$ours" "$pid" "$r" "$rw" "$bs" "$qd"
			elif [ $((r % 2)) = 1 ]; then
				run_job nvmeof-tgt "$ours" "$pid" "$r" "$rw" "$bs" "$qd"
				run_job nvmet "$theirs" "" "$r" "$rw" "$bs" "$qd"
			else
				run_job nvmet "$theirs" "" "$r" "$rw" "$bs" "$qd"
				run_job nvmeof-tgt "$ours" "$pid" "$r" "$rw" "$bs" "$qd"
			fi
		done
	done
	nvme disconnect-all >/dev/null
	kill -TERM $pid
	wait $pid
	report
	if [ -n "$theirs" ]; then
		kt_clear
	fi
}

# tls_cost (BENCH_TLS=both): what TLS costs each target, from the two
# passes of this boot, per job: the median IOPS with TLS over the median
# without, and what TLS adds to the guest's busy CPU per I/O (median with
# TLS minus median without), ours over the kernel target's: the measure
# the goal is stated in, since our IOPS in clear are not the kernel
# target's. With the guest's vCPUs all busy during a job, its busy CPU per
# I/O is the vCPUs over the IOPS, so the line gives how many were busy.
tls_cost() {
	echo
	echo "what TLS costs, in this boot (medians of the rounds; CPU: busy seconds per million I/Os):"
	awk -F'\t' -v vcpus="$(nproc)" "$awk_med"'
		{ t = FILENAME ~ /plain-rounds/ ? "p" : "q"; k = t SUBSEP $1 SUBSEP $2; n[k]++
		  iops[k, n[k]] = $4; busy[k, n[k]] = $9; jobs[$2] = 1 }
		function m(a, k,   i, v) { for (i = 1; i <= n[k]; i++) v[i] = a[k, i]; return med(v, n[k]) }
		END {
			for (j in jobs) {
				po = "p" SUBSEP "nvmeof-tgt" SUBSEP j; qo = "q" SUBSEP "nvmeof-tgt" SUBSEP j
				pk = "p" SUBSEP "nvmet" SUBSEP j; qk = "q" SUBSEP "nvmet" SUBSEP j
				if (!n[po] || !n[qo] || !n[pk] || !n[qk]) continue
				ao = m(busy, qo) - m(busy, po); ak = m(busy, qk) - m(busy, pk)
				printf "  %-18s IOPS with TLS / without: nvmeof-tgt %.2f, nvmet %.2f\n", j, m(iops, qo) / m(iops, po), m(iops, qk) / m(iops, pk)
				if (ak > 0)
					printf "  %-18s CPU TLS adds per I/O: nvmeof-tgt %.0f, nvmet %.0f: ratio %.2f, TLS costs us %s the kernel target\n", j, ao, ak, ao / ak, (ao <= ak ? "no more than" : "more than")
				else # the rounds spread wider than what TLS adds
					printf "  %-18s CPU TLS adds per I/O: nvmeof-tgt %.0f, nvmet %.0f: no ratio\n", j, ao, ak
				printf "  %-18s vCPUs busy with TLS: nvmeof-tgt %.2f, nvmet %.2f, of %d\n", j, m(iops, qo) * m(busy, qo) / 1e6, m(iops, qk) * m(busy, qk) / 1e6, vcpus
			}
		}' /results/plain-rounds.tsv /results/rounds.tsv | sort -s -k1,3
}

if [ "$tls" = both ]; then
	tls=""
	bench_pass
	for f in rounds p99 rxe link sched; do mv "/results/$f.tsv" "/results/plain-$f.tsv"; done
	echo
	echo "=== the same jobs in the same boot, TLS 1.3 required on both targets"
	tls=1 idle_secs=0
	bench_pass
	tls_cost
else
	bench_pass
fi
