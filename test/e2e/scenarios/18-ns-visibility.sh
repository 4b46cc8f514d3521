# Per-host namespaces: two host NQNs on one subsystem with three
# namespaces, 1 shared, 2 for host A alone, 3 for host B alone. Each
# host's controller lists exactly its own (nvme list-ns) and has a path
# device for exactly those; a live add shows namespace 2 to host B and
# its device appears there, a live remove hides it from host A and its
# device leaves, both without a reconnect; a read sent raw to a hidden
# NSID fails with Invalid Namespace or Format (0Bh).
[ -x "${RDMAHOST:-}" ] || fail "RDMAHOST='${RDMAHOST:-}' is not an executable: test/e2e/e2e_test.go builds it"
daemon_only "namespaces[].hosts is nvmeof-tgt's"
nqn=nqn.2026-11.io.example:tenants
ha=nqn.2014-08.org.nvmexpress:uuid:18181818-0000-4000-8000-00000000000a
hb=nqn.2014-08.org.nvmexpress:uuid:18181818-0000-4000-8000-00000000000b
config /tmp/tgt.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}, {id: 2, address: $ADDR, port: 4421}]
subsystems:
  - nqn: $nqn
    hosts: [$ha, $hb]
    namespaces:
      - {nsid: 1, backend: nullblk, size: 64MiB}
      - {nsid: 2, backend: nullblk, size: 64MiB, hosts: [$ha]}
      - {nsid: 3, backend: nullblk, size: 64MiB, hosts: [$hb]}
CFG
start_target /tmp/tgt.yaml
ctl() { "$NVMEOF_TGT" ctl "$@"; }

# nvme-cli refuses a second connection to one address and service,
# whatever the host NQN: host B comes in through port 2.
nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$nqn" --hostnqn="$ha" --nr-io-queues=1 \
	--hostid=18181818-0000-4000-8000-00000000000a >/dev/null || fail "connect host A"
nvme connect -t rdma -a "$ADDR" -s 4421 -n "$nqn" --hostnqn="$hb" --nr-io-queues=1 \
	--hostid=18181818-0000-4000-8000-00000000000b >/dev/null || fail "connect host B"

# ctrl_of_host HOSTNQN: the live controller (nvmeN) of that host NQN.
ctrl_of_host() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$nqn" ] && [ "$(cat "$c/hostnqn")" = "$1" ] &&
			[ "$(cat "$c/state")" = live ] && basename "$c" && return 0
	done
	return 1
}
wait_for 10 "host A's controller live" ctrl_of_host "$ha" >/dev/null
wait_for 10 "host B's controller live" ctrl_of_host "$hb" >/dev/null
ca=$(ctrl_of_host "$ha")
cb=$(ctrl_of_host "$hb")
echo "connected at $SECONDS s; host A: $ca (cntlid $(cat /sys/class/nvme/$ca/cntlid)), host B: $cb (cntlid $(cat /sys/class/nvme/$cb/cntlid))"

# listed CTRL: the NSIDs the controller's Active Namespace ID list holds.
listed() {
	nvme list-ns "/dev/$1" | sed -n 's/^\[ *[0-9]*\]:0x\([0-9a-f]*\)$/\1/p' | while read -r x; do printf '%d ' "0x$x"; done
}
# paths CTRL: the NSIDs the host has a block device for through CTRL (the
# controller's path devices with native multipath, its namespaces
# without), ascending.
paths() {
	local d
	for d in /sys/class/nvme/"$1"/nvme*n*; do
		[ -e "$d/nsid" ] && printf '%s\n' "$(cat "$d/nsid")"
	done | sort -n | tr '\n' ' '
}
# has_paths CTRL WANT: paths CTRL is WANT.
has_paths() { [ "$(paths "$1")" = "$2" ]; }

wait_for 10 "host A's devices for namespaces 1 and 2" has_paths "$ca" "1 2 "
wait_for 10 "host B's devices for namespaces 1 and 3" has_paths "$cb" "1 3 "
assert_eq "host A's active namespaces" "$(listed "$ca")" "1 2 "
assert_eq "host B's active namespaces" "$(listed "$cb")" "1 3 "
for want in 1 2 3; do wait_dev "$nqn" "$want" >/dev/null; done
echo "ok: block devices for namespaces 1, 2 and 3 on the host"

# Live: namespace 2 shown to host B too, then hidden from host A.
cntlid_of() { cat /sys/class/nvme/"$1"/cntlid; }
cntlid_a=$(cntlid_of "$ca")
cntlid_b=$(cntlid_of "$cb")
ctl add namespace-host "$nqn" 2 "$hb" || fail "ctl add namespace-host"
wait_for 10 "namespace 2 appearing on host B" has_paths "$cb" "1 2 3 "
assert_eq "host B's active namespaces after the add" "$(listed "$cb")" "1 2 3 "
assert_eq "host A's namespaces after the add" "$(paths "$ca")" "1 2 "
ctl remove namespace-host "$nqn" 2 "$ha" || fail "ctl remove namespace-host"
wait_for 10 "namespace 2 leaving host A" has_paths "$ca" "1 "
assert_eq "host A's active namespaces after the remove" "$(listed "$ca")" "1 "
assert_eq "host B's namespaces after the remove" "$(paths "$cb")" "1 2 3 "
# Neither host reconnected: the same controllers, live, with their IDs.
assert_eq "host A's controller" "$(ctrl_of_host "$ha") $(cntlid_of "$ca")" "$ca $cntlid_a"
assert_eq "host B's controller" "$(ctrl_of_host "$hb") $(cntlid_of "$cb")" "$cb $cntlid_b"
dev2=$(wait_dev "$nqn" 2)
dd if="$dev2" of=/dev/null bs=4k count=16 iflag=direct 2>/dev/null || fail "read of namespace 2 through host B"
echo "ok: namespace 2 reads through host B ($dev2), at $SECONDS s"

# A read sent raw, as host A, to the namespaces hidden from it. Not with
# nvme io-passthru: the Linux host refuses a passthrough command whose
# NSID is not its device's ("nsid (2) in cmd does not match nsid (1) of
# namespace"), so no command for a namespace it lacks leaves it. rdmahost
# connects a controller of host A's NQN of its own and sends the read.
out=$("$RDMAHOST" read -addr "$ADDR" -port "$PORT" -nqn "$nqn" -host "$ha" -nsid 1,2,3 2>&1) ||
	fail "rdmahost read as host A: $out"
# 0x400b: Invalid Namespace or Format, with DNR.
assert_eq "raw reads of namespaces 1, 2 and 3 as host A" "$(echo $out)" "nsid=1 status=0x0 nsid=2 status=0x400b nsid=3 status=0x400b"
assert_eq "namespace 2's hosts in ctl list -json" \
	"$(ctl list -json | jq -c '.subsystems[0].namespaces[] | select(.nsid == 2) | .hosts')" "[\"$hb\"]"

# The SMART log counts only the namespaces the host sees: 8 MiB written
# through host B to namespace 3, hidden from host A, moves B's counters
# and not A's (which has some of its own, of the shared namespace 1).
smart_of() { nvme smart-log "/dev/$1" -o json | jq -r ".$2 | tonumber"; }
dd if=/dev/zero of="$(wait_dev "$nqn" 1)" bs=1M count=1 oflag=direct status=none || fail "write of namespace 1"
dev3=$(wait_dev "$nqn" 3)
a_before="$(smart_of "$ca" data_units_written) $(smart_of "$ca" host_write_commands)"
b_units=$(smart_of "$cb" data_units_written)
dd if=/dev/zero of="$dev3" bs=1M count=8 oflag=direct status=none || fail "write of namespace 3 through host B"
assert_eq "host A's data units written and write commands after host B wrote 8 MiB to namespace 3" \
	"$(smart_of "$ca" data_units_written) $(smart_of "$ca" host_write_commands)" "$a_before"
b_moved=$(($(smart_of "$cb" data_units_written) - b_units))
[ "$b_moved" -ge 16 ] || fail "host B's data units written moved by $b_moved for 8 MiB, want at least 16"
echo "ok: 8 MiB to namespace 3 through host B: B's data units written +$b_moved, host A's still $a_before (units, commands)"

nvme disconnect-all >/dev/null
stop_target
