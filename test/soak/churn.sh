#!/bin/bash
# Soak test of queue pair churn, outside CI: the e2e scenario 81-churn on
# the daemon's default rdma settings, CYCLES (default 1000) disconnects
# under fio load and 10 × CYCLES abandoned controllers, in one boot of the
# e2e guest (guest kernel E2E_KERNEL, 6.1 by default). The scenario checks
# that threads, fds, RSS, registered memory, the shared receive queues and
# the buffer pool come back to their starting values; this prints its
# table of them. As root, after test/install-deps.sh:
#
#	test/soak/churn.sh [CYCLES]
#
# CHURN_ABANDONS overrides the number of abandoned controllers. The log
# goes to test/soak/churn-<date>.log (not kept in git).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cycles=${1:-1000}
[[ $cycles =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [CYCLES]" >&2; exit 2; }
export CHURN_CYCLES=$cycles CHURN_ABANDONS=${CHURN_ABANDONS:-$((10 * cycles))} CHURN_DEFAULT_CONFIG=1
# Measured on soft-RoCE under TCG on a busy machine: up to 20 s a cycle
# and 0.2 s an abandoned controller; twice that, and the boot, bound the run.
secs=$((600 + 40 * CHURN_CYCLES + CHURN_ABANDONS * 2 / 5))
export E2E_ONLY='^81-churn$' E2E_SCENARIO_TIMEOUT=$secs E2E_GUEST_TIMEOUT=$((secs + 300))
source "$repo/test/soak/run.sh"
# The scenario's own account: the phases and the figures at start and end.
soak_run churn "$secs" \
	"$((3 * CHURN_CYCLES)) disconnects under load, $CHURN_ABANDONS abandoned controllers, default rdma settings; up to $((secs / 60)) min" \
	'churn:|\(a\)|\(b\)|\(c\)|fresh host|--- at |[a-z_]+ +[0-9a-z]+ -> |ok: threads|FAIL'
