# Two daemons serve one subsystem, as two controllers of it: the same NQN,
# serial and namespaces, disjoint controller ID ranges (A 1-99, B
# 100-199), each its own dm-linear mapping of one shared disk. The host
# connects to both and, with native multipath, sees one subsystem with two
# live paths and their ANA states, one block device per namespace, and
# data written through one daemon read back through the other.
daemon_only "runs two nvmeof-tgt daemons"
nqn=nqn.2026-11.io.example:ha
addr2_up
shared_disk ha-a ha-b
# Namespace 1 (group 1) on the shared disk, namespace 2 (group 2) a
# nullblk; each group optimized on one daemon and non-optimized on the other.
subsys() {
	cat <<YAML
subsystems:
  - nqn: $nqn
    serial: HA0000084
    allow_any_host: true
    cntlid_min: $1
    cntlid_max: $2
    namespaces:
      - {nsid: 1, backend: block, path: $3, ana_group: 1}
      - {nsid: 2, backend: nullblk, size: 64MiB, ana_group: 2, uuid: 0c4f3a58-84e2-4b7a-9d1e-2f8a6b3c5d01}
YAML
}
config /tmp/a.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT, ana: {1: optimized, 2: non_optimized}}]
$(subsys 1 99 /dev/mapper/ha-a)
CFG
config /tmp/b.yaml <<CFG
$(b_settings)
ports: [{id: 2, address: $ADDR2, port: $PORT, ana: {1: non_optimized, 2: optimized}}]
$(subsys 100 199 /dev/mapper/ha-b)
CFG
start_target /tmp/a.yaml
start_target2 /tmp/b.yaml
ha_connect_both "$nqn"
echo "controllers: $ca through A, $cb through B"
wait_dev "$nqn" 2 >/dev/null

# One subsystem, both controllers in it.
subsys_of() { # CTRL: the host's subsystem directory holding the controller
	local s
	for s in /sys/class/nvme-subsystem/nvme-subsys*; do
		[ -e "$s/$1" ] && { basename "$s"; return 0; }
	done
	return 1
}
assert_eq "subsystem of B's controller" "$(subsys_of "$cb")" "$(subsys_of "$ca")"
nvme list-subsys -o json >"$RESULTS/$SCENARIO-list-subsys.json" || fail "nvme list-subsys"
nvme list-subsys "$dev" | tee "$RESULTS/$SCENARIO-list-subsys.txt"
paths=$(jq --arg n "$nqn" '[.. | objects | select(.NQN? == $n) | .Paths[] | select(.State == "live")] | length' \
	"$RESULTS/$SCENARIO-list-subsys.json")
assert_eq "live paths in nvme list-subsys" "$paths" 2
# Each path with its state and ANA state ("+- nvme0 rdma traddr=...,trsvcid=4420 live optimized").
path_line() { grep -F "traddr=$1," "$RESULTS/$SCENARIO-list-subsys.txt" | awk '{print $(NF - 1), $NF}'; }
assert_eq "nvme list-subsys: the path through A" "$(path_line "$ADDR")" "live optimized"
assert_eq "nvme list-subsys: the path through B" "$(path_line "$ADDR2")" "live non-optimized"

# One block device per namespace, two paths each.
assert_eq "namespace block devices of $nqn" "$(ns_heads "$nqn")" 2
blockdevs=$(find /dev -maxdepth 1 -name 'nvme*n*' -type b | grep -cv 'p[0-9]*$' || true)
assert_eq "nvme namespace block devices in /dev" "$blockdevs" 2
for c in "$ca" "$cb"; do
	for ns in 1 2; do
		path_of "$c" "$ns" >/dev/null || fail "no path of $c to namespace $ns"
	done
done

# Controller IDs from each daemon's range.
ida=$(cat "/sys/class/nvme/$ca/cntlid")
idb=$(cat "/sys/class/nvme/$cb/cntlid")
{ [ "$ida" -ge 1 ] && [ "$ida" -le 99 ]; } || fail "A's controller ID $ida is outside 1-99"
{ [ "$idb" -ge 100 ] && [ "$idb" -le 199 ]; } || fail "B's controller ID $idb is outside 100-199"
echo "ok: controller IDs $ida (A) and $idb (B)"

# ANA states per path and group, as each daemon's port sets them.
assert_eq "namespace 1 through A" "$(ana_state "$ca" 1)" optimized
assert_eq "namespace 1 through B" "$(ana_state "$cb" 1)" non-optimized
assert_eq "namespace 2 through A" "$(ana_state "$ca" 2)" non-optimized
assert_eq "namespace 2 through B" "$(ana_state "$cb" 2)" optimized
assert_eq "ANA group of namespace 2" "$(cat "/sys/class/nvme/$ca/$(path_of "$ca" 2)/ana_grpid")" 2
nvme ana-log "/dev/$ca" -o json >"$RESULTS/$SCENARIO-ana-log-a.json" || fail "nvme ana-log through A"
cat "$RESULTS/$SCENARIO-ana-log-a.json"

# The same blocks behind both: written through A's path, read through B's.
dd if=/dev/urandom of=/tmp/ha-pattern bs=1M count=4 status=none
a0=$(path_ios "$ca" 1) b0=$(path_ios "$cb" 1)
dd if=/tmp/ha-pattern of="$dev" bs=1M oflag=direct conv=fsync status=none || fail "write through the multipath device"
path_ios_above "$ca" 1 "$a0" || fail "the write did not go through A, the optimized path"
assert_eq "I/Os through B, the non-optimized path, during the write" "$(($(path_ios "$cb" 1) - b0))" 0
# Make B the optimized path for namespace 1 by disconnecting A, then read.
nvme disconnect -d "$ca" >&2 || fail "disconnect A's controller"
wait_for 10 "A's controller gone" ctrl_state_is "$ca" gone
cmp /tmp/ha-pattern <(dd if="$dev" bs=1M count=4 iflag=direct status=none) || fail "data read through B differs"
path_ios_above "$cb" 1 0 || fail "the read did not go through B"
echo "ok: written through A, read back through B"
disconnect "$nqn"
stop_target2
stop_target
