#!/bin/bash
# Runs every scenario inside the guest, one after the other, each in its
# own shell: RESULTS/<name>.log holds its output, RESULTS/<name>.rc its exit
# status, RESULTS/<name>.secs its duration, and RESULTS/<name>.skip the
# reason when it does not apply to TARGET. E2E_DIR, TARGET, E2E_ONLY,
# E2E_EXTRA, E2E_SCENARIO_TIMEOUT and (for our daemon) NVMEOF_TGT come
# from the host.
set -euo pipefail
export RESULTS=/results TARGET=${TARGET:-nvmeof-tgt}
mkdir -p /data
# A virtio disk with ext4, so file namespaces use O_DIRECT as in production.
if [ -b /dev/vda ]; then
	mkfs.ext4 -q -F /dev/vda
	mount /dev/vda /data
fi
if [ "$TARGET" = kernel ]; then
	source "$E2E_DIR/../vm/kernel-target.sh"
fi
# stamp: its input, each line after the seconds since the scenario began.
stamp() {
	local t0=${EPOCHREALTIME/./} line us
	while IFS= read -r line; do
		us=$((${EPOCHREALTIME/./} - t0))
		printf '%4d.%d %s\n' $((us / 1000000)) $((us / 100000 % 10)) "$line"
	done
}
export -f stamp
# leftovers: undo what a scenario left behind, should its own clean-up
# not have run: controllers, daemons, the kernel target's configuration, a
# mount, device-mapper tables (lib.sh's shared_disk) and the second and
# third addresses (addr2_up, 95-gw-handover's).
leftovers() {
	local f comm line
	for f in /sys/class/nvme/nvme*; do
		[ -e "$f" ] && { nvme disconnect-all >/dev/null 2>&1 || true; }
		break
	done
	for f in /proc/[0-9]*/comm; do
		read -r comm <"$f" 2>/dev/null || continue
		if [ "$comm" = nvmeof-tgt ]; then
			pkill -9 -x nvmeof-tgt 2>/dev/null || true
			break
		fi
	done
	if [ "$TARGET" = kernel ]; then
		kt_clear >/dev/null 2>&1 || true
	fi
	while read -r _ line _; do
		[ "$line" = /mnt/e2e ] && { umount /mnt/e2e 2>/dev/null || true; }
	done </proc/mounts
	for f in /dev/mapper/*; do
		[ "${f##*/}" = control ] && continue
		[ -e "$f" ] && { DM_DISABLE_UDEV=1 dmsetup remove_all >/dev/null 2>&1 || true; }
		break
	done
	ip -force -batch - >/dev/null 2>&1 <<<$'addr del 10.99.0.2/24 dev eth0\naddr del 10.99.0.3/24 dev eth0' || true
}

# cpu_ticks: CPU_TOTAL and CPU_BUSY, the guest's CPU time so far in ticks,
# all of it and what was not idle, from /proc/stat. A scenario that keeps
# the guest's CPUs busy is made faster only by less work; one that leaves
# them idle, by shorter waits.
cpu_ticks() {
	local cpu user nice system idle iowait irq softirq steal
	read -r cpu user nice system idle iowait irq softirq steal _ </proc/stat
	CPU_TOTAL=$((user + nice + system + idle + iowait + irq + softirq + steal))
	CPU_BUSY=$((CPU_TOTAL - idle - iowait))
}

# E2E_TRACE_EXEC=1: RESULTS/<name>.exec, the kernel's trace of the
# scenario's process starts and exits, for test/e2e/exec-costs.sh.
tracing=/sys/kernel/tracing
if [ -n "${E2E_TRACE_EXEC:-}" ]; then
	[ -d "$tracing/events" ] || mount -t tracefs tracefs "$tracing"
	echo 8192 >"$tracing/buffer_size_kb"
	echo 1 >"$tracing/events/sched/sched_process_exec/enable"
	echo 1 >"$tracing/events/sched/sched_process_exit/enable"
fi

# The scenarios to run, in order (E2E_EXTRA: one more, outside the suite,
# a soak test's); the index of the first that needs the Ceph cluster
# (ceph_up or ceph_apart_up), and whether any needs its second OSD
# (ceph_apart_up: mode apart).
selected=() ceph_first="" ceph_mode=cluster
for s in "$E2E_DIR"/scenarios/*.sh ${E2E_EXTRA:+"$E2E_EXTRA"}; do
	name=${s##*/}
	name=${name%.sh}
	if [ -n "${E2E_ONLY:-}" ] && ! [[ $name =~ $E2E_ONLY ]]; then
		continue
	fi
	text=""
	IFS= read -r -d '' text <"$s" || true
	[[ $text != *ceph_apart_up* ]] || ceph_mode=apart
	[[ $text != *ceph_up* ]] || [ -n "$ceph_first" ] || ceph_first=${#selected[@]}
	selected+=("$s")
done
# ceph_ahead I: start the Ceph cluster in the background (ceph-start.sh)
# once the I-th scenario is within ceph_lead of the first that needs it:
# the start keeps one of the guest's CPUs busy for about 45 s and so
# overlaps scenarios that leave one idle. A guest with one CPU has none
# idle (19-qos beside the start there measured 10 IOPS, where it needs
# well over 40), so it starts the cluster when the first scenario asks.
ceph_lead=3
[ "$(nproc)" -gt 1 ] || ceph_lead=0
ceph_begun=""
ceph_ahead() {
	[ -z "$ceph_begun" ] && [ -n "$ceph_first" ] && [ "$1" -ge $((ceph_first - ceph_lead)) ] && [ "$ceph_lead" -gt 0 ] || return 0
	ceph_begun=1
	# Marked begun here, before it runs, so that ceph_up waits for it
	# rather than starting a second one.
	mkdir -p /run/e2e-ceph
	: >/run/e2e-ceph/cluster.begun
	[ "$ceph_mode" != apart ] || : >/run/e2e-ceph/apart.begun
	echo "starting the Ceph cluster ($ceph_mode) in the background" >/dev/console
	"$E2E_DIR/ceph-start.sh" "$ceph_mode" </dev/null >/dev/null 2>&1 &
}
for ((k = 0; k < ${#selected[@]}; k++)); do
	s=${selected[k]}
	name=${s##*/}
	name=${name%.sh}
	ceph_ahead "$k"
	echo "$name" >>"$RESULTS/scenarios.list"
	[ -z "${E2E_TRACE_EXEC:-}" ] || : >"$tracing/trace"
	start=${EPOCHREALTIME/./}
	read -r pid0 </proc/sys/kernel/ns_last_pid
	cpu_ticks
	busy0=$CPU_BUSY total0=$CPU_TOTAL
	rc=0
	# A scenario that hangs must not take the others' time: each gets
	# E2E_SCENARIO_TIMEOUT seconds (most take under 30), or what a first
	# line "# e2e-timeout: SECONDS" asks for, if that is longer. (Bash
	# alone between scenarios: a process start costs the emulated guest.)
	limit=${E2E_SCENARIO_TIMEOUT:-300}
	first=""
	read -r first <"$s" || true
	if [[ $first =~ ^#\ e2e-timeout:\ ([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -gt "$limit" ]; then
		limit=${BASH_REMATCH[1]}
	fi
	# Each line of its log starts with the seconds since it started, so a
	# slow step shows where the time went. The stamping runs beside the
	# scenario, not after it in a pipe, which a process the scenario left
	# running would hold open.
	SCENARIO=$name timeout -k 10 "$limit" \
		bash -c 'exec > >(stamp >"$RESULTS/$SCENARIO.log") 2>&1; source "$E2E_DIR/lib.sh"; source "$1"' _ "$s" </dev/null || rc=$?
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		echo "FAIL: timed out after $limit s" >>"$RESULTS/$name.log"
		dmesg | tail -25 >>"$RESULTS/$name.log"
	fi
	us=$((${EPOCHREALTIME/./} - start))
	secs=$((us / 1000000)).$((us / 100000 % 10))
	# Tasks started, processes and threads (both take their IDs from the
	# same space): in the emulated guest a process start costs tens of
	# milliseconds, half a second for some tools, so they are what a slow
	# scenario is checked for first.
	read -r pid1 </proc/sys/kernel/ns_last_pid
	cpu_ticks
	busy=$((100 * (CPU_BUSY - busy0) / (CPU_TOTAL - total0 + 1)))
	if [ -n "${E2E_TRACE_EXEC:-}" ]; then
		cat "$tracing/trace" >"$RESULTS/$name.exec"
	fi
	echo "$rc" >"$RESULTS/$name.rc"
	echo "$secs" >"$RESULTS/$name.secs"
	echo "$busy" >"$RESULTS/$name.busy"
	echo "$name: rc $rc in $secs s, $((pid1 - pid0)) tasks, CPUs $busy % busy" | tee /dev/console
	# Whatever the scenario left behind must not leak into the next one.
	# (Each tool runs only when there is something for it to do: a process
	# start costs the emulated guest.)
	leftovers
done
