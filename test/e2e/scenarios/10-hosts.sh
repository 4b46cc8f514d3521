# Several hosts on one subsystem, an allow-list, and a discovery log that
# shows each host only what it may connect to.
open=nqn.2026-11.io.example:shared
locked=nqn.2026-11.io.example:locked
h1=nqn.2014-08.org.nvmexpress:uuid:11111111-1111-1111-1111-111111111111
h2=nqn.2014-08.org.nvmexpress:uuid:22222222-2222-2222-2222-222222222222
config /tmp/tgt.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}, {id: 2, address: $ADDR, port: 4421}]
subsystems:
  - nqn: $open
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 256MiB}]
  - nqn: $locked
    allow_any_host: false
    ports: [1]
    hosts: [$h1]
    namespaces: [{nsid: 1, backend: nullblk, size: 256MiB}]
CFG
start_target /tmp/tgt.yaml
# Two hosts (different host NQNs) on one subsystem get two controllers.
nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$open" --hostnqn="$h1" --hostid=11111111-1111-1111-1111-111111111111 >/dev/null || fail "connect host 1"
# nvme-cli refuses a second connection to the same address and service,
# whatever the host NQN: the second host comes in through port 2.
nvme connect -t rdma -a "$ADDR" -s 4421 -n "$open" --hostnqn="$h2" --hostid=22222222-2222-2222-2222-222222222222 >/dev/null || fail "connect host 2"
# live_cntlids NQN: how many distinct controller IDs the host has live on NQN.
live_cntlids() {
	for x in /sys/class/nvme/nvme*; do
		[ "$(cat "$x/subsysnqn")" = "$1" ] && [ "$(cat "$x/state")" = live ] && cat "$x/cntlid"
	done | sort -u | wc -l
}
two_live() { [ "$(live_cntlids "$open")" = 2 ]; }
wait_for 10 "two live controllers on $open" two_live
assert_eq "distinct controllers on $open" "$(live_cntlids "$open")" 2
dev=$(wait_dev "$open")
fio_ok both --filename="$dev" --rw=randrw --bs=4k --iodepth=8 --ioengine=libaio --direct=1 --size=16m

# The allow-list.
if nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$locked" --hostnqn="$h2" --hostid=22222222-2222-2222-2222-222222222222 2>/tmp/refused; then
	fail "host outside the allow-list connected"
fi
echo "ok: refused: $(cat /tmp/refused)"
dmesg | tail -5 | grep -i "connect" || true
nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$locked" --hostnqn="$h1" --hostid=11111111-1111-1111-1111-111111111111 >/dev/null || fail "allowed host refused"
echo "ok: allowed host connected"

# Discovery filtered per host.
n1=$(nvme discover -t rdma -a "$ADDR" -s "$PORT" --hostnqn="$h1" -o json | jq '[.records[] | select(.subtype == "nvme subsystem")] | length')
n2=$(nvme discover -t rdma -a "$ADDR" -s "$PORT" --hostnqn="$h2" -o json | jq '[.records[] | select(.subtype == "nvme subsystem")] | length')
assert_eq "subsystems shown to the allowed host" "$n1" 2
assert_eq "subsystems shown to the other host" "$n2" 1
n3=$(nvme discover -t rdma -a "$ADDR" -s 4421 --hostnqn="$h1" -o json | jq '[.records[] | select(.subtype == "nvme subsystem")] | length')
assert_eq "subsystems on port 2 (locked is on port 1 only)" "$n3" 1
nvme disconnect-all >/dev/null
stop_target
