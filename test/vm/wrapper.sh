#!/bin/bash
# Runs inside the guest as PID 1: sets up the network and soft-RoCE, runs
# the host's script, records its exit status, powers off.
#
# No set -e here: PID 1 must reach the power-off whatever fails, so every
# set-up step goes through step(), which reports a failure as exit status
# 125 in main.rc instead of hanging or panicking the guest.
set -uo pipefail
exec 2>>/results/setup.log

off() {
	sync
	poweroff -f
	echo o >/proc/sysrq-trigger
}
step() {
	if ! "$@" >>/results/setup.log 2>&1; then
		echo "guest: set-up step failed: $*" | tee -a /results/setup.log >/dev/console
		echo "guest set-up failed at: $*" >/results/main.log
		echo 125 >/results/main.rc
		off
	fi
}

ln -sf /proc/self/fd /dev/fd
mkdir -p /dev/pts /dev/shm
step mount -t devpts devpts /dev/pts
step mount -t tmpfs tmpfs /dev/shm
step ip link set lo up
step ip link set eth0 up
step ip addr add 10.99.0.1/24 dev eth0
# rxe finds its CRC through the crypto API; a request_module from inside
# the guest fails, so load it first.
step modprobe crc32_generic
step modprobe rdma_rxe
step rdma link add rxe0 type rxe netdev eth0
step modprobe rdma_ucm
step modprobe ib_uverbs
step modprobe nvme-rdma
step modprobe virtio_blk
# AES-NI and carry-less multiply, which udev loads on a real machine from
# the CPU's features (the emulated CPU has both): without them kernel TLS
# encrypts in generic C, on the host and in both targets.
if grep -qw aes /proc/cpuinfo; then
	step modprobe aesni_intel
	step modprobe ghash_clmulni_intel
fi
# The kernel target (test/vm/kernel-target.sh) loads nvmet, nvmet-rdma and
# null_blk itself, with the parameters it needs; check here only that the
# kernel has them, so a missing module shows up as a set-up failure.
step modinfo -n nvmet nvmet-rdma null_blk loop
ulimit -l unlimited
mkdir -p /etc/nvme
[ -s /etc/nvme/hostnqn ] || nvme gen-hostnqn >/etc/nvme/hostnqn
[ -s /etc/nvme/hostid ] || cat /proc/sys/kernel/random/uuid >/etc/nvme/hostid
# Seconds from kernel start to the script, for the host's timing report.
cut -d' ' -f1 /proc/uptime >/results/boot.secs
uname -r >/results/kernel
echo "guest: $(uname -r), $(ibv_devices | awk 'NR>2{print $1}' | xargs) ready after $(cat /results/boot.secs) s" >/dev/console
set -a
. /results/env.sh
set +a
# The kernel asks for nvme-rdma (or nvme-tcp) at every connect and
# discovery, loaded or not: modprobe-loaded answers for a loaded module
# without modprobe's start.
echo "$VM_DIR/modprobe-loaded" >/proc/sys/kernel/modprobe
bash /results/main.sh >/results/main.log 2>&1 </dev/null
echo $? >/results/main.rc
off
