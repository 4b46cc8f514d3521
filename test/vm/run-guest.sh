#!/bin/bash
# Boots the test guest (QEMU, software emulation) and runs one script in it
# as root, with soft-RoCE up on 10.99.0.1. The guest sees this machine's
# file system read-only at the same paths, so binaries built here run
# there unchanged.
#
#   run-guest.sh --script FILE --results DIR [--env K=V]... [--disk IMG]... [--timeout SECONDS]
#
# E2E_KERNEL=6.1 (the default) or 6.12 picks the guest kernel (prepare.sh).
# DIR receives main.log, main.rc, console.log and whatever the script
# writes under /results. The exit status is the script's; 125 when the
# guest failed to set up, hung past the timeout or crashed. In the guest,
# VM_DIR is this directory (for kernel-target.sh) and the --env variables
# are exported. The guest has 6 GiB (GUEST_MEM_MB): the Ceph monitor and
# OSD of the rbd scenarios run beside the daemons under test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script="" results="" timeout=900
envs=() disks=()
while [ $# -gt 0 ]; do
	case $1 in
	--script) script=$2; shift 2 ;;
	--results) results=$2; shift 2 ;;
	--env) envs+=("$2"); shift 2 ;;
	--disk) disks+=("$2"); shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	*) echo "run-guest: unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ -z "$script" ] || [ -z "$results" ]; then
	echo "usage: run-guest.sh --script FILE --results DIR [--env K=V]... [--disk IMG]... [--timeout S]" >&2
	exit 2
fi
eval "$("$here/prepare.sh")"
mkdir -p "$results"
results=$(cd "$results" && pwd)
rm -f "$results/main.rc" "$results/main.log" "$results/setup.log" "$results/boot.secs" "$results/kernel"
cp "$script" "$results/main.sh"
cp "$here/wrapper.sh" "$results/wrapper.sh"
# VM_DIR: this directory, so guest scripts can source kernel-target.sh.
printf 'VM_DIR=%q\n' "$here" >"$results/env.sh"
for e in "${envs[@]}"; do
	printf '%s=%q\n' "${e%%=*}" "${e#*=}" >>"$results/env.sh"
done
drives=()
for d in "${disks[@]}"; do
	drives+=(-drive "file=$d,if=virtio,format=raw,cache=unsafe")
done
# KVM guests hang before their first console line on these machines (their
# KVM is kvm-pvm, which runs only kernels built as PVM guests): TCG.
# Under TCG the guest kernel finds its CPUs' TSCs unsynchronized and
# falls back to the emulated HPET, where a clock read is a system call and
# a device access: 8 to 10 us for Go's time.Now against 0.6 us on the TSC
# (2026-11-29). The TSC is the host's, the same on every vCPU, so the
# guest is told to trust it, as a real machine's kernel does.
#
# The CPU is x86-64-v2 with AES and carry-less multiply (the kernel's
# crc32c, rxe's ICRC, TLS) and RDRAND (without it the kernel's random pool
# is not ready when the scenarios start, and getrandom(2) fails nvme-cli's key
# generation), not "max": with max, glibc copies with rep
# movsb (ERMS, FSRM), which TCG runs a byte at a time, and the guest ran
# gzip 1.7 times and python3's start 1.3 times slower, six scenarios 13 %
# (2026-11-30, docs/testing.md). GUEST_SMP: vCPUs, 2 unless set (each is a
# thread of this machine's).
cpu=qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+pclmulqdq,+aes,+rdrand
timeout --foreground -k 10 "$timeout" qemu-system-x86_64 \
	-accel tcg,thread=multi -cpu "$cpu" -m "${GUEST_MEM_MB:-6144}" -smp "${GUEST_SMP:-2}" \
	-kernel "$KERNEL" -initrd "$INITRD" \
	-append "console=ttyS0 quiet panic=-1 tsc=reliable clocksource=tsc" \
	-nographic -no-reboot \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs "local,path=$MODULES,mount_tag=modules,security_model=none,readonly=on" \
	-virtfs "local,path=$results,mount_tag=results,security_model=none" \
	-netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0 \
	"${drives[@]}" >"$results/console.log" 2>&1 || true
if [ ! -f "$results/main.rc" ]; then
	echo "run-guest: the guest did not finish (timeout ${timeout}s or crash); see $results/console.log" >&2
	tail -20 "$results/console.log" >&2
	exit 125
fi
exit "$(cat "$results/main.rc")"
