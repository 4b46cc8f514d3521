#!/bin/bash
# Where a scenario's time goes to process starts: reads the traces that
# E2E_TRACE_EXEC=1 leaves (RESULTS/<name>.exec, the guest kernel's
# sched_process_exec and sched_process_exit events) and prints, per
# program, how many times it ran and its lifetimes' sum and mean, most
# time first. In the emulated guest a start alone costs 20 ms to half a
# second, so a program run often in a poll shows here.
#
#   E2E_KEEP=1 E2E_TRACE_EXEC=1 E2E_ONLY='^99b-gw-balance$' go test -tags e2e ./test/e2e/
#   test/e2e/exec-costs.sh /tmp/nvmeof-tgt-e2e-*/guest/99b-gw-balance.exec
#
# A lifetime runs from the exec to the process's last exit event; a
# program that waits (sleep, fio) counts its waiting too.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: exec-costs.sh TRACE..." >&2; exit 2; }
awk '
function ts(   i) { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) return substr($i, 1, length($i) - 1) }
function field(name,   i) { for (i = 1; i <= NF; i++) if (index($i, name "=") == 1) return substr($i, length(name) + 2) }
/sched_process_exec:/ { p = field("pid"); prog[p] = field("filename"); start[p] = ts(); next }
/sched_process_exit:/ { p = field("pid"); if (p in prog) end[p] = ts() }
END {
	for (p in prog) {
		if (!(p in end)) continue
		n[prog[p]]++
		sum[prog[p]] += end[p] - start[p]
	}
	for (f in n) { printf "%8.1f s %6d runs %7.3f s each  %s\n", sum[f], n[f], sum[f] / n[f], f; total += sum[f]; runs += n[f] }
	printf "%8.1f s %6d runs in all\n", total, runs > "/dev/stderr"
}' "$@" | sort -rn
