#!/bin/bash
# Inside the guest: the same fio jobs against nvmeof-tgt and against the
# Linux kernel target (nvmet-rdma), both over soft-RoCE on 10.99.0.1 and
# both backed by a null device, so the figures compare the targets alone.
set -euo pipefail
runtime=${BENCH_RUNTIME:-8}
read -r -a jobs <<<"${BENCH_JOBS:-}"
if [ ${#jobs[@]} -eq 0 ]; then
	jobs=("randread 4k 32" "randwrite 4k 32" "read 128k 16" "write 128k 16" "randread 4k 1")
else # BENCH_JOBS: "rw,bs,qd ..." for a subset
	for i in "${!jobs[@]}"; do jobs[$i]=${jobs[$i]//,/ }; done
fi

bench() { # label device
	local label=$1 dev=$2 j rw bs qd
	for j in "${jobs[@]}"; do
		read -r rw bs qd <<<"$j"
		out="/results/$label-$rw-$bs-qd$qd.json"
		fio --name=b --filename="$dev" --rw="$rw" --bs="$bs" --iodepth="$qd" --ioengine=libaio --direct=1 \
			--runtime="$runtime" --time_based --output-format=json --output="$out"
		jq -r --arg l "$label" --arg j "$rw $bs qd$qd" \
				'.jobs[0] | [$l, $j, ((.read.iops + .write.iops) | floor), (((.read.bw + .write.bw) / 1024) | floor), ((.read.clat_ns.mean + .write.clat_ns.mean) / 1000 | floor)] | @tsv' "$out"
	done
}

wait_dev() {
	for _ in $(seq 100); do
		for d in /dev/nvme*n1; do [ -b "$d" ] && { echo "$d"; return; }; done
		sleep 0.1
	done
	echo "no namespace appeared" >&2
	exit 1
}

printf 'target\tjob\tIOPS\tMiB/s\tmean_clat_us\n' >/results/bench.tsv

cat >/tmp/bench.yaml <<CFG
log: {level: warn}
ports: [{id: 1, address: 10.99.0.1, port: 4420}]
subsystems:
  - nqn: nqn.2026-11.io.example:bench
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]
CFG
"$NVMEOF_TGT" -config /tmp/bench.yaml 2>/results/target.log &
pid=$!
# Up once it answers discovery (30 s at most).
for _ in $(seq 300); do
	nvme discover -t rdma -a 10.99.0.1 -s 4420 >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || { echo "nvmeof-tgt exited: $(tail -5 /results/target.log)" >&2; exit 1; }
	sleep 0.1
done
nvme connect -t rdma -a 10.99.0.1 -s 4420 -n nqn.2026-11.io.example:bench >/dev/null
bench nvmeof-tgt "$(wait_dev)" >>/results/bench.tsv
nvme disconnect-all >/dev/null
kill -TERM $pid
wait $pid

[[ ${BENCH_TARGETS:-nvmeof-tgt nvmet} == *nvmet* ]] || { column -t -s $'\t' /results/bench.tsv; exit 0; }
# The kernel target over a 1 GiB null_blk device, as nvmeof-tgt's nullblk
# namespace above.
source "$VM_DIR/kernel-target.sh"
kt_load
kt_port 1 10.99.0.1 4420
kt_subsystem kbench
kt_namespace kbench 1 "$(kt_nullb $((1 << 30)) 512)"
kt_link 1 kbench
nvme connect -t rdma -a 10.99.0.1 -s 4420 -n kbench >/dev/null
bench nvmet "$(wait_dev)" >>/results/bench.tsv
nvme disconnect-all >/dev/null
column -t -s $'\t' /results/bench.tsv
