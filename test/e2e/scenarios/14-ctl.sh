# The admin socket: build a subsystem with `nvmeof-tgt ctl` on a daemon
# started without any, use it from the host, save the running
# configuration, restart from the saved file and find the same state and
# the same data.
daemon_only "nvmeof-tgt ctl is nvmeof-tgt's"
ctl() { "$NVMEOF_TGT" ctl "$@"; }
nqn=nqn.2026-11.io.example:built
hostnqn=$(cat /etc/nvme/hostnqn)
config /tmp/tgt.yaml <<CFG
log: {format: json}
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems: []
CFG
start_target /tmp/tgt.yaml
ctl add subsystem "$nqn" -host "$hostnqn" -serial ctl0001 || fail "ctl add subsystem"
ctl add namespace "$nqn" -backend file -path /data/ctl1.img -size 64MiB || fail "ctl add namespace 1"
ctl add namespace "$nqn" -nsid 5 -backend nullblk -size 1GiB -block-size 4096 || fail "ctl add namespace 5"
ctl add port -id 2 -address "$ADDR" -port 4421 || fail "ctl add port"
# An NVMe/TCP port, with an ANA state and a referral to port 2, from ctl:
# a host's discovery over TCP reaches it and lists both.
ctl add port -id 3 -transport tcp -address "$ADDR" -port 4430 -ana 7=non_optimized -referral "rdma://$ADDR:4421" ||
	fail "ctl add port -transport tcp"
modprobe nvme-tcp || fail "modprobe nvme-tcp"
disc=$(nvme discover -t tcp -a "$ADDR" -s 4430 -o json) || fail "nvme discover over the ctl-added TCP port"
jqs --arg n "$nqn" "$disc" '.records | any(.trtype == "tcp" and (.trsvcid | tonumber) == 4430 and .subnqn == $n)' \
	'.records | any(.trtype == "rdma" and (.trsvcid | tonumber) == 4421 and .subtype == "discovery subsystem referral")'
[ "${JQ[0]}" = true ] || fail "no TCP record of $nqn on port 3 in its discovery log: $disc"
[ "${JQ[1]}" = true ] || fail "no RDMA referral to port 2 in port 3's discovery log: $disc"
listed=$(ctl list) || fail "ctl list"
grep -q "^port 3  tcp $ADDR:4430" <<<"$listed" || fail "ctl list does not show port 3 as tcp: $listed"
grep -q "referral *rdma $ADDR:4421" <<<"$listed" || fail "ctl list does not show port 3's referral as rdma: $listed"
assert_eq "port 3 in get_state" "$(ctl list -json | jq -c '.ports[] | select(.id == 3) | [.transport, .ana["7"], .referrals[0].transport]')" \
	'["tcp","non_optimized","rdma"]'
echo "ok: ctl add port -transport tcp answers a host's discovery over TCP"
# A refused change says why and changes nothing.
if out=$(ctl add namespace "$nqn" -backend file 2>&1); then fail "a namespace without a path was accepted"; fi
echo "refused as expected: $out"
echo "$out" | grep -q "path" || fail "the refusal does not name the field"
if ctl add namespace "$nqn" -nsid 9 -backend block -path /dev/no-such-disk 2>/dev/null; then fail "a missing block device was accepted"; fi

dev=$(connect "$nqn")
dev5=$(wait_dev "$nqn" 5)
ctl list
assert_eq "controllers listed" "$(ctl list -json | jq --arg n "$nqn" '[.subsystems[] | select(.nqn == $n) | .controllers[]] | length')" 1
assert_eq "namespace 5 size" "$(blockdev --getsize64 "$dev5")" $((1 << 30))
# JSON logs: every line parses; controller and queue events carry their fields.
log=$RESULTS/$SCENARIO-target.log
# One jq, which fails on a line that is not JSON.
checks=$(jq -sc --arg n "$nqn" '[(("controller created", "queue connected", "namespace added", "subsystem added") as $m | any(.[]; .msg == $m)),
	(map(select(.msg == "controller created" and .subsystem == $n))[0] | [has("host"), has("cntlid"), has("qid"), has("peer"), has("port")])]' "$log") ||
	fail "the JSON log has a line that is not JSON"
assert_eq "JSON log: controller created, queue connected, namespace added, subsystem added; the fields of 'controller created'" \
	"$checks" '[true,true,true,true,[true,true,true,true,true]]'
dd if=/dev/urandom of=/tmp/pattern bs=1M count=8 status=none
dd if=/tmp/pattern of="$dev" bs=1M oflag=direct conv=fsync status=none || fail "write through the ctl-built namespace"
want=$(sha256sum </tmp/pattern)

# Removing namespace 5 with ctl: the host's block device goes.
ctl remove namespace "$nqn" 5 || fail "ctl remove namespace"
wait_ns_gone "$nqn" 5

# A host removed from the allow-list loses its controller; the other
# host keeps its own.
other_id=99999999-9999-4999-8999-999999999999
other=nqn.2014-08.org.nvmexpress:uuid:$other_id
ctl add host "$nqn" "$other" || fail "ctl add host"
# Through port 2: nvme-cli takes a second connect to the same address and
# port for one already made, whatever the host NQN.
nvme connect -t rdma -a "$ADDR" -s 4421 -n "$nqn" --hostnqn="$other" --hostid="$other_id" >&2 ||
	fail "nvme connect as the added host"
controllers_of() { ctl list -json | jq --arg n "$nqn" --arg h "$1" '[.subsystems[] | select(.nqn == $n) | .controllers[] | select(.host == $h)] | length'; }
assert_eq "controllers of the added host" "$(controllers_of "$other")" 1
ctl remove host "$nqn" "$other" || fail "ctl remove host"
none_of() { [ "$(controllers_of "$1")" = 0 ]; }
wait_for 10 "the removed host's controller ended" none_of "$other"
assert_eq "controllers of the host still allowed" "$(controllers_of "$hostnqn")" 1
for c in /sys/class/nvme/nvme*; do
	# The removed host's controller, retrying to reconnect and refused.
	[ "$(cat "$c/hostnqn" 2>/dev/null)" = "$other" ] && nvme disconnect -d "$(basename "$c")" >/dev/null 2>&1
done
echo "ok: the removed host lost its controller, the other kept its own"

state() { ctl list -json | jq -S 'del(.generation) | .subsystems[].controllers = []'; }
before=$(state)
ctl save /tmp/saved.yaml || fail "ctl save"
"$NVMEOF_TGT" -check -config /tmp/saved.yaml || fail "-check rejects the saved configuration"
nvme disconnect-all >/dev/null
stop_target

start_target /tmp/saved.yaml
after=$(state)
if [ "$before" != "$after" ]; then
	diff <(echo "$before") <(echo "$after") || true
	fail "state after restarting from the saved file differs"
fi
echo "ok: the restarted daemon's state is identical"
dev=$(connect "$nqn")
assert_eq "data after restart from the saved file" "$(head -c $((8 << 20)) "$dev" | sha256sum)" "$want"
nvme discover -t rdma -a "$ADDR" -s 4421 >/dev/null || fail "the ctl-added port does not answer after restart"

# Removing a port drops the controllers that came through it, only those.
nvme connect -t rdma -a "$ADDR" -s 4421 -n "$nqn" --ctrl-loss-tmo=1 --reconnect-delay=1 >/dev/null || fail "connect through port 2"
# controller_ports: the ports of the subsystem's controllers, as the daemon lists them.
controller_ports() { ctl list -json | jq --arg n "$nqn" '[.subsystems[] | select(.nqn == $n) | .controllers[] | .port | tostring] | sort | join(",")' -r; }
ports_are() { [ "$(controller_ports)" = "$1" ]; }
wait_for 10 "controllers through ports 1 and 2" ports_are 1,2
assert_eq "controllers before removing port 2" "$(ctl list -json | jq --arg n "$nqn" '[.subsystems[] | select(.nqn == $n) | .controllers[]] | length')" 2
ctl remove port 2 || fail "ctl remove port"
wait_for 5 "only port 1's controller left" ports_are 1
assert_eq "ports of the remaining controllers" "$(controller_ports)" 1
if nvme discover -t rdma -a "$ADDR" -s 4421 >/dev/null 2>&1; then fail "port 2 still answers after ctl remove port"; fi
dd if="$dev" of=/dev/null bs=1M count=4 iflag=direct status=none || fail "I/O through port 1 after removing port 2"
echo "ok: port 2 gone, port 1's controller unaffected"
nvme disconnect-all >/dev/null
stop_target
