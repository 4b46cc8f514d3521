#!/bin/bash
# Nemesis soak of the gateway pair, outside CI: in one boot of the e2e
# guest (guest kernel E2E_KERNEL, 6.1 by default), two gateways export one
# RBD image, the host writes versioned blocks on the multipath device, and
# a random fault hits the group's owner one after another for MINUTES
# (default 30): kill -9, SIGSTOP then SIGCONT, SIGTERM, a planned release,
# the OSD stopped and started, the owner's client blocklisted from outside
# (test/soak/nemesis-guest.sh). After every fault, every block must hold
# its newest acknowledged version and the writer must have seen no I/O
# error. This prints the faults survived by kind and the longest path
# outage (the writer's slowest write). As root, after test/install-deps.sh:
#
#	test/soak/nemesis.sh [MINUTES]
#
# NEMESIS_SEED repeats a run's order of faults. The log goes to
# test/soak/nemesis-<date>.log (not kept in git).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
minutes=${1:-30}
[[ $minutes =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [MINUTES]" >&2; exit 2; }
export NEMESIS_SECONDS=$((minutes * 60))
# The last fault may start just before the end and take up to 5 min to
# settle and verify; the cluster's start takes a few more.
secs=$((NEMESIS_SECONDS + 900))
export E2E_EXTRA=$repo/test/soak/nemesis-guest.sh E2E_ONLY='^nemesis-guest$'
export E2E_SCENARIO_TIMEOUT=$secs E2E_GUEST_TIMEOUT=$((secs + 300))
source "$repo/test/soak/run.sh"
soak_run nemesis "$secs" "gateway pair nemesis for $minutes min" 'nemesis:|FAIL'
