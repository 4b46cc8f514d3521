#!/bin/bash
# Runs every test, on a fresh Debian 12 machine as root: installs what is
# missing, then go vet, the unit and fuzz-seed tests, and the end-to-end
# suite in a QEMU guest with soft-RoCE.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
"$repo/test/install-deps.sh"
export PATH=/usr/local/go/bin:$PATH
echo "== go.mod and go.sum tidy"
./test/check-tidy.sh
echo "== go vet"
go vet ./...
go vet -tags e2e ./test/...
echo "== blktests control script self-test"
NVMEOF_REQUIRE_TOOLS=1 ./test/blktests/selftest.sh
echo "== unit tests (race detector on)"
# One Ceph cluster for every package whose tests need one, rather than one
# per test binary: the first test to need it starts it in ceph_dir (see
# test/ceph), while other packages' tests run.
ceph_dir=$(mktemp -d)
stop_ceph() { "$repo/test/ceph/cluster.sh" stop "$ceph_dir"; rm -rf "$ceph_dir"; }
trap stop_ceph EXIT
# Tests that need a tool install-deps provides fail rather than skip here.
NVMEOF_CEPH_ENV=$ceph_dir/env NVMEOF_REQUIRE_TOOLS=1 go test -race -count=1 ./...
stop_ceph
trap - EXIT
# e2e KERNEL ONLY TIMEOUT: the end-to-end suite on one guest kernel. On a
# failure, each failed scenario's reason again at the end, where the tail
# of a long log shows it. A failure on 6.1 still lets 6.12 run, so one run
# reports both.
e2e() {
	local log rc=0
	log=$(mktemp)
	E2E_KERNEL=$1 E2E_ONLY=$2 go test -count=1 -tags e2e -v -timeout "$3" ./test/e2e/ 2>&1 | tee "$log" || rc=$?
	if [ "$rc" != 0 ]; then
		echo "== failed on guest kernel $1"
		awk '/^=== RUN   TestScenarios\// { name = $3 }
			/^ +FAIL: |exit status [0-9]+ after|scenario produced no result|the guest did not|^panic/ { sub(/^ +/, ""); print (name == "" ? "the guest" : name) ": " $0 }' "$log"
	fi
	rm -f "$log"
	return "$rc"
}
# 97-dhchap needs a host with NVMe authentication, which 6.1 is built
# without; 24-tcp and 89-ha-resv run on 6.12 only, to keep the suite's
# time (run one on 6.1 with E2E_KERNEL=6.1 E2E_ONLY='^24-tcp$'); 25-tcp-long
# runs outside CI (E2E_KERNEL=6.12 E2E_ONLY='^25-tcp-long$').
echo "== end-to-end suite, guest kernel 6.1 (every scenario but 24-tcp, 25-tcp-long, 89-ha-resv and 97-dhchap)"
e2e_rc=0
# The 6.1 guest took 28 to 32 min on this 2-core machine (2026-11-27): it
# may run 45 before it is stopped, rather than the default 35.
E2E_GUEST_TIMEOUT=${E2E_GUEST_TIMEOUT:-2700} e2e 6.1 '^([^289]|2[^45]|8[^9]|9[^7])' 50m || e2e_rc=1
# The host side changed much between 6.1 and 6.12 (multipath, ANA, naming):
# connect, fio verify and the multipath scenarios run on 6.12 too, and
# NVMe/TCP and in-band authentication, which run on 6.12 only.
echo "== end-to-end suite, guest kernel 6.12 (connect, fio verify, TCP, multipath and ANA, authentication)"
e2e 6.12 '^(02-connect|03-fio-verify-file|24-tcp|8[4-9]-.*|97-dhchap)$' 15m || e2e_rc=1
exit "$e2e_rc"
