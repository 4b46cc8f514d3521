# nvme discover lists every configured subsystem on the port.
config /tmp/tgt.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: nqn.2026-11.io.example:vol1
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: /data/vol1.img, size: 256MiB}]
  - nqn: nqn.2026-11.io.example:null1
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]
CFG
start_target /tmp/tgt.yaml
out=$(nvme discover -t rdma -a "$ADDR" -s "$PORT" -o json)
echo "$out"
assert_eq "subsystem records" "$(echo "$out" | jq '[.records[] | select(.subtype == "nvme subsystem")] | length')" 2
for nqn in nqn.2026-11.io.example:vol1 nqn.2026-11.io.example:null1; do
	assert_eq "$nqn listed over rdma at $ADDR:$PORT" \
		"$(echo "$out" | jq -r --arg n "$nqn" '.records[] | select(.subnqn == $n) | "\(.trtype) \(.traddr) \(.trsvcid)"')" \
		"rdma $ADDR $PORT"
done
stop_target
