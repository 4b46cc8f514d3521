#!/bin/bash
# The demo's guest side: our target and the Linux host in one guest,
# talking RDMA over soft-RoCE on 10.99.0.1.
set -euo pipefail
step() { printf '\n== %s\n' "$*"; }
nqn=nqn.2026-11.io.example:vol1

step "soft-RoCE device"
ibv_devices

mkfs.ext4 -q -F /dev/vda
mkdir -p /var/lib/nvmeof-tgt
mount /dev/vda /var/lib/nvmeof-tgt
cat >/tmp/demo.yaml <<CFG
log: {level: info, format: text}
ports:
  - {id: 1, transport: rdma, address: 10.99.0.1, port: 4420}
subsystems:
  - nqn: $nqn
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: file, path: /var/lib/nvmeof-tgt/vol1.img, size: 1GiB}
CFG
step "configuration"
cat /tmp/demo.yaml
"$NVMEOF_TGT" -check -config /tmp/demo.yaml

step "starting nvmeof-tgt"
"$NVMEOF_TGT" -config /tmp/demo.yaml 2>/results/target.log &
pid=$!
for _ in $(seq 60); do
	nvme discover -t rdma -a 10.99.0.1 -s 4420 >/dev/null 2>&1 && break
	sleep 0.5
done

step "nvme discover -t rdma -a 10.99.0.1 -s 4420"
nvme discover -t rdma -a 10.99.0.1 -s 4420

step "nvme connect -t rdma -a 10.99.0.1 -s 4420 -n $nqn"
nvme connect -t rdma -a 10.99.0.1 -s 4420 -n "$nqn"
sleep 2
nvme list
lsblk -o NAME,SIZE,TYPE,MODEL /dev/nvme*n1
dev=$(ls /dev/nvme*n1 | head -1)

step "fio: 4 KiB random read/write, queue depth 16, 10 s, against $dev"
fio --name=demo --filename="$dev" --ioengine=libaio --direct=1 --rw=randrw --bs=4k --iodepth=16 \
	--runtime=10 --time_based --size=512m --group_reporting | grep -E "read:|write:|lat \(usec\): min|err="

step "nvme disconnect -n $nqn"
nvme disconnect -n "$nqn"

step "stopping nvmeof-tgt (SIGTERM)"
kill -TERM "$pid"
wait "$pid"
echo "nvmeof-tgt exited with status $?"
step "target log"
cat /results/target.log
