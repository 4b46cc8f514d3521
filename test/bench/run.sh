#!/bin/bash
# Side-by-side fio benchmark: nvmeof-tgt against the Linux kernel target,
# each serving a null device over soft-RoCE inside one QEMU guest. Prints a
# table with the CPU each target costs per I/O; BENCH_RUNTIME sets seconds
# per job (default 8), BENCH_TARGETS which targets to run (default
# "nvmeof-tgt nvmet"), BENCH_JOBS a subset of jobs ("rw,bs,qd ..."),
# BENCH_IDLE the seconds of the idle measurement (default 30, 0 skips it),
# BENCH_PERF the jobs to profile with perf ("rw,bs,qd ..."), BENCH_SYSCALLS
# the jobs to count nvmeof-tgt's system calls in, BENCH_TRANSPORT=tcp the
# same jobs over NVMe/TCP against nvmet-tcp (default rdma: over soft-RoCE
# against nvmet-rdma), and with it BENCH_TLS=1 both targets with TLS 1.3
# required (E2E_KERNEL=6.12: Debian's 6.1 has no NVMe/TCP TLS). The method
# is described at the top of guest-bench.sh.
#
# Everything is emulated (TCG, 2 vCPUs), so only ratios taken in one run
# mean anything.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
export PATH=/usr/local/go/bin:$PATH
# The link's figures (guest-bench.sh): sockperf and iperf3, which the guest
# runs from this machine's file system.
for p in sockperf iperf3; do
	command -v $p >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $p >/dev/null
done
bin=$repo/.build/bench/nvmeof-tgt
CGO_ENABLED=1 go build -ldflags "-X main.version=$(git describe --tags --always --dirty)" -o "$bin" ./cmd/nvmeof-tgt
results=$(mktemp -d /var/tmp/nvmeof-tgt-bench-XXXXXX)
"$repo/test/vm/run-guest.sh" --script "$repo/test/bench/guest-bench.sh" --results "$results" \
	--env "NVMEOF_TGT=$bin" --env "BENCH_RUNTIME=${BENCH_RUNTIME:-8}" \
	--env "BENCH_TARGETS=${BENCH_TARGETS:-nvmeof-tgt nvmet}" --env "NVMEOF_TGT_SPIN_US=${NVMEOF_TGT_SPIN_US:-}" --env "BENCH_JOBS=${BENCH_JOBS:-}" \
	--env "BENCH_IDLE=${BENCH_IDLE:-30}" --env "BENCH_ROUNDS=${BENCH_ROUNDS:-3}" --env "BENCH_PERF=${BENCH_PERF:-}" \
	--env "BENCH_SYSCALLS=${BENCH_SYSCALLS:-}" --env "BENCH_TRANSPORT=${BENCH_TRANSPORT:-rdma}" --env "BENCH_TLS=${BENCH_TLS:-}" --timeout 1500
cat "$results/main.log"
# Profiles (BENCH_PERF): flat, by command, shared object and symbol.
for f in "$results"/*.perf.data; do
	[ -f "$f" ] || continue
	perf report -f -i "$f" --kallsyms="$results/kallsyms" --stdio --no-children -g none \
		--sort comm,dso,sym --percent-limit 0.5 >"${f%.data}.txt" 2>/dev/null || true
	echo "profile: ${f%.data}.txt"
done
echo "(raw results in $results)"
