#!/bin/bash
# Runs inside the guest as PID 1: sets up the network and soft-RoCE, runs
# the host's script, records its exit status, powers off.
ln -sf /proc/self/fd /dev/fd
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
ip link set lo up
ip link set eth0 up
ip addr add 10.99.0.1/24 dev eth0
# rxe finds its CRC through the crypto API; a request_module from inside
# the guest fails, so load it first.
modprobe crc32_generic
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev eth0
modprobe rdma_ucm
modprobe ib_uverbs
modprobe nvme-rdma
modprobe virtio_blk
ulimit -l unlimited
mkdir -p /etc/nvme
[ -s /etc/nvme/hostnqn ] || nvme gen-hostnqn >/etc/nvme/hostnqn
[ -s /etc/nvme/hostid ] || cat /proc/sys/kernel/random/uuid >/etc/nvme/hostid
echo "guest: $(uname -r), $(ibv_devices | awk 'NR>2{print $1}' | xargs) ready" >/dev/console
set -a
. /results/env.sh
set +a
bash /results/main.sh >/results/main.log 2>&1 </dev/null
echo $? >/results/main.rc
sync
poweroff -f
