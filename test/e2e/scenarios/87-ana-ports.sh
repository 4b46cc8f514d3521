# One daemon, two ports of one subsystem with different ANA states for its
# group: non-optimized on port 1 and optimized on port 2. The host,
# connected through both, reads each controller's ANA log, holds each
# path's state and sends I/O only through the optimized port. The
# subsystem's controller IDs come from a narrowed range. The kernel
# target (NVMEOF_E2E_TARGET=kernel) configured from the same file passes
# the same checks.
nqn=nqn.2026-11.io.example:anaports
addr2_up
config /tmp/tgt.yaml <<CFG
ports:
  - {id: 1, address: $ADDR, port: $PORT, ana: {1: non_optimized}}
  - {id: 2, address: $ADDR2, port: $PORT, ana: {1: optimized}}
subsystems:
  - nqn: $nqn
    allow_any_host: true
    cntlid_min: 10
    cntlid_max: 19
    namespaces: [{nsid: 1, backend: file, path: /data/anaports.img, size: 64MiB, ana_group: 1}]
CFG
start_target /tmp/tgt.yaml
c1=$(connect_at "$ADDR" "$nqn")
c2=$(connect_at "$ADDR2" "$nqn")
dev=$(wait_dev "$nqn" 1)
assert_eq "namespace block devices of $nqn" "$(ns_heads "$nqn")" 1
for c in "$c1" "$c2"; do
	id=$(cat "/sys/class/nvme/$c/cntlid")
	{ [ "$id" -ge 10 ] && [ "$id" -le 19 ]; } || fail "controller ID $id of $c is outside 10-19"
done
assert_eq "path through port 1" "$(ana_state "$c1" 1)" non-optimized
assert_eq "path through port 2" "$(ana_state "$c2" 1)" optimized
# Each controller's ANA log: the group, its state on that port, the namespace.
for c in "$c1" "$c2"; do
	nvme ana-log "/dev/$c" -o json >"$RESULTS/$SCENARIO-ana-log-$c.json" || fail "nvme ana-log /dev/$c"
	cat "$RESULTS/$SCENARIO-ana-log-$c.json"
done
ana_desc() { # CTRL: "grpid state nsids" of its ANA log's only group descriptor
	jq -r '[.. | objects | select(has("grpid"))] | if length != 1 then "groups: \(length)" else
		.[0] | "\(.grpid) \(.state) \([.. | objects | .nsid? // empty | tostring] | join(","))" end' \
		"$RESULTS/$SCENARIO-ana-log-$1.json"
}
assert_eq "ANA log through port 1" "$(ana_desc "$c1")" "1 non-optimized 1"
assert_eq "ANA log through port 2" "$(ana_desc "$c2")" "1 optimized 1"
i1=$(path_ios "$c1" 1) i2=$(path_ios "$c2" 1)
fio_ok anaports --filename="$dev" --direct=1 --ioengine=libaio --rw=randrw --bs=4k --iodepth=8 --size=16M \
	--verify=crc32c --do_verify=1 --verify_fatal=1
echo "I/Os through port 1: $(($(path_ios "$c1" 1) - i1)), port 2: $(($(path_ios "$c2" 1) - i2))"
path_ios_above "$c2" 1 $((i2 + 1000)) || fail "fio's I/O did not go through port 2, the optimized one"
assert_eq "I/Os through port 1, the non-optimized one" "$(($(path_ios "$c1" 1) - i1))" 0
disconnect "$nqn"
stop_target
