#!/bin/bash
# The demo's guest side: our target and the Linux host in one guest,
# talking RDMA over soft-RoCE on 10.99.0.1.
set -euo pipefail
step() { printf '\n== %s\n' "$*"; }
nqn=nqn.2026-11.io.example:vol1

step "soft-RoCE device (rdma_rxe over eth0, 10.99.0.1)"
ibv_devices

step "a file system for the namespace's backing file (ext4 on /dev/vda)"
mkfs.ext4 -q -F /dev/vda
mkdir -p /var/lib/nvmeof-tgt
mount /dev/vda /var/lib/nvmeof-tgt
df -h /var/lib/nvmeof-tgt
cat >/tmp/demo.yaml <<CFG
log: {level: info, format: text}
metrics: {address: 127.0.0.1:9750}
ports:
  - {id: 1, transport: rdma, address: 10.99.0.1, port: 4420}
subsystems:
  - nqn: $nqn
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: file, path: /var/lib/nvmeof-tgt/vol1.img, size: 1GiB}
CFG
step "configuration (/tmp/demo.yaml), checked with nvmeof-tgt -check"
cat /tmp/demo.yaml
"$NVMEOF_TGT" -check -config /tmp/demo.yaml
echo "configuration OK"

step "starting nvmeof-tgt in the background (log: target.log)"
"$NVMEOF_TGT" -config /tmp/demo.yaml 2>/results/target.log &
pid=$!
up=""
for _ in $(seq 60); do
	if nvme discover -t rdma -a 10.99.0.1 -s 4420 >/dev/null 2>&1; then up=1; break; fi
	sleep 0.5
done
[ -n "$up" ] || { echo "nvmeof-tgt did not come up"; cat /results/target.log; exit 1; }
echo "nvmeof-tgt is up (pid $pid)"

step "nvme discover -t rdma -a 10.99.0.1 -s 4420"
nvme discover -t rdma -a 10.99.0.1 -s 4420

step "nvme connect -t rdma -a 10.99.0.1 -s 4420 -n $nqn"
nvme connect -t rdma -a 10.99.0.1 -s 4420 -n "$nqn"
dev=""
for _ in $(seq 100); do
	for s in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ "$(cat "$s/subsysnqn" 2>/dev/null)" = "$nqn" ] || continue
		for d in "$s"/nvme*n1; do [ -b "/dev/$(basename "$d")" ] && dev=/dev/$(basename "$d"); done
	done
	[ -z "$dev" ] || break
	sleep 0.1
done
[ -n "$dev" ] || { echo "no block device appeared for $nqn"; exit 1; }
nvme list

step "lsblk: the namespace as a local block device"
lsblk -o NAME,SIZE,TYPE,MODEL,SERIAL "$dev"

step "fio: 4 KiB random read/write, queue depth 16, 10 s, against $dev"
fio --name=demo --filename="$dev" --ioengine=libaio --direct=1 --rw=randrw --bs=4k --iodepth=16 \
	--runtime=10 --time_based --size=512m --group_reporting |
	grep -E "read:|write:|lat \(usec\): min|err=|READ:|WRITE:"

step "the running state, from the admin socket: nvmeof-tgt ctl list"
"$NVMEOF_TGT" ctl list

step "a second namespace, added live: nvmeof-tgt ctl add namespace (the host rescans)"
"$NVMEOF_TGT" ctl add namespace "$nqn" -nsid 2 -backend nullblk -size 256MiB
for _ in $(seq 100); do
	nvme list 2>/dev/null | grep -q "n2 " && break
	sleep 0.1
done
nvme list

step "Prometheus metrics (curl http://127.0.0.1:9750/metrics, excerpt)"
curl -fsS http://127.0.0.1:9750/metrics | grep -E '^nvmeof_tgt_(reads|writes)_completed_total|^nvmeof_tgt_(controllers|queue_pairs|config_generation)'

step "nvme disconnect -n $nqn"
nvme disconnect -n "$nqn"

step "stopping nvmeof-tgt (SIGTERM)"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
echo "nvmeof-tgt exited with status $rc"

step "target log"
cat /results/target.log
exit "$rc"
