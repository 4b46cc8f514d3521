# nvme discover lists every configured subsystem on the port, each record
# offering SQ flow control disable (TREQ bit 2) as the Linux target's do;
# nvme connect-all then connects every subsystem with it disabled, and
# data written through one reads back.
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
listed() { echo ".records[] | select(.subnqn == \"$1\") | \"\\(.trtype) \\(.traddr) \\(.trsvcid)\""; }
jqs "$out" '[.records[] | select(.subtype == "nvme subsystem")] | length' \
	"$(listed nqn.2026-11.io.example:vol1)" "$(listed nqn.2026-11.io.example:null1)" \
	'[.records[] | select(.subtype == "nvme subsystem") | .treq] | unique | join(";")'
assert_eq "subsystem records" "${JQ[0]}" 2
assert_eq "nqn.2026-11.io.example:vol1 listed over rdma at $ADDR:$PORT" "${JQ[1]}" "rdma $ADDR $PORT"
assert_eq "nqn.2026-11.io.example:null1 listed over rdma at $ADDR:$PORT" "${JQ[2]}" "rdma $ADDR $PORT"
assert_eq "TREQ of the subsystem records" "${JQ[3]}" "not specified, sq flow control disable supported"

nvme connect-all -t rdma -a "$ADDR" -s "$PORT" >&2 || fail "nvme connect-all"
dev=$(wait_dev nqn.2026-11.io.example:vol1)
wait_dev nqn.2026-11.io.example:null1 >/dev/null
head -c 1M /dev/urandom >/tmp/disc-data
dd if=/tmp/disc-data of="$dev" bs=1M count=1 oflag=direct status=none || fail "write through connect-all's controller"
cmp /tmp/disc-data <(dd if="$dev" bs=1M count=1 iflag=direct status=none) || fail "what was written through connect-all's controller reads back different"
echo "ok: 1 MiB written and read back through connect-all's controller"
if ours; then
	# Admin and one I/O queue per CPU, for each of the two subsystems.
	assert_eq "queues connected with SQ flow control disabled" \
		"$(grep -c 'msg="queue connected".*sq_flow_control=disabled' "$RESULTS/$SCENARIO-target.log")" "$((2 * ($(nproc) + 1)))"
fi
nvme disconnect-all >/dev/null
stop_target
