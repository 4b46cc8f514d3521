# Start-up: the daemon creates the soft-RoCE link its configuration asks
# for, and refuses to start with an error that names the cause and the
# fix when it cannot serve.
daemon_only "start-up checks are nvmeof-tgt's"
nqn=nqn.2026-11.io.example:rxe
# expect_start_error NAME PATTERN: the daemon exits 1 quickly, saying PATTERN.
expect_start_error() {
	local rc=0
	timeout 20 "$NVMEOF_TGT" -config /tmp/bad.yaml >"$RESULTS/$SCENARIO-$1.log" 2>&1 || rc=$?
	assert_eq "exit status with $1" "$rc" 1
	grep -qE "$2" "$RESULTS/$SCENARIO-$1.log" || fail "$1: no '$2' in: $(cat "$RESULTS/$SCENARIO-$1.log")"
	echo "ok: $1: $(grep -E "$2" "$RESULTS/$SCENARIO-$1.log" | head -1 | cut -c1-240)"
}

# Take the guest's soft-RoCE link away; the daemon makes its own.
rdma link delete rxe0 || fail "deleting rxe0"
config /tmp/tgt.yaml <<CFG
rxe: [eth0]
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - {nqn: $nqn, allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 64MiB}]}
CFG
start_target /tmp/tgt.yaml
rdma link show | grep -q "rxe_eth0.*netdev eth0" || fail "no soft-RoCE link on eth0: $(rdma link show)"
grep -q "created soft-RoCE link" "$RESULTS/$SCENARIO-target.log" || fail "link creation not logged"
dev=$(connect "$nqn")
fio_ok rxe --filename="$dev" --rw=randrw --bs=16k --iodepth=8 --ioengine=libaio --direct=1 --size=16m
nvme disconnect-all >/dev/null

# A second daemon on the same address: port in use (and its own socket).
config /tmp/bad.yaml <<CFG
control: {socket: /run/nvmeof-tgt/second.sock}
ports: [{id: 1, address: $ADDR, port: $PORT}]
CFG
expect_start_error port-in-use "port in use"
stop_target

# Started again, the link exists and is reused.
start_target /tmp/tgt.yaml
assert_eq "soft-RoCE links on eth0" "$(rdma link show | grep -c 'netdev eth0')" 1
stop_target

config /tmp/bad.yaml <<CFG
ports: [{id: 1, address: 10.99.0.77, port: $PORT}]
CFG
expect_start_error foreign-address "no RDMA device owns this address.*soft-RoCE"
config /tmp/bad.yaml <<CFG
rxe: [nosuch0]
ports: [{id: 1, address: $ADDR, port: $PORT}]
CFG
expect_start_error missing-netdev 'rxe\[0\]: no network interface .*nosuch0'

config /tmp/bad.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - {nqn: $nqn, allow_any_host: true, namespaces: [{nsid: 1, backend: block, path: /dev/no-such-disk}]}
CFG
expect_start_error missing-device "no-such-disk.*the block device is missing"
config /tmp/bad.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - {nqn: $nqn, allow_any_host: true, namespaces: [{nsid: 1, backend: file, path: /data/missing.img}]}
CFG
expect_start_error missing-file 'namespaces\[0\].size: required: the file does not exist yet'

# Without CAP_IPC_LOCK, a low locked-memory limit is refused up front.
if command -v capsh >/dev/null; then
	config /tmp/bad.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}]
CFG
	rc=0
	(ulimit -l 64; capsh --drop=cap_ipc_lock -- -c "exec $NVMEOF_TGT -config /tmp/bad.yaml") >"$RESULTS/$SCENARIO-memlock.log" 2>&1 || rc=$?
	assert_eq "exit status with a 64 KiB memlock limit" "$rc" 1
	grep -q "LimitMEMLOCK=infinity" "$RESULTS/$SCENARIO-memlock.log" || fail "memlock: $(cat "$RESULTS/$SCENARIO-memlock.log")"
	echo "ok: memlock limit refused"
else
	fail "capsh is missing in the guest (libcap2-bin)"
fi
