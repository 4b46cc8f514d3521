# Referrals: daemon A's port lists daemon B's port in its discovery log, so
# a host that knows only A finds B. `nvme discover` against A shows the
# referral entry with B's address; `nvme connect-all` against A follows it
# and ends up connected to the subsystem through both daemons. The kernel
# target (NVMEOF_E2E_TARGET=kernel), one target whose two ports stand for
# A and B, passes the same checks.
nqn=nqn.2026-11.io.example:ha
addr2_up
if ours; then
	ha_up "$nqn" optimized non_optimized "referrals: [{address: $ADDR2, port: $PORT}]"
else
	config /tmp/tgt.yaml <<CFG
ports:
  - {id: 1, address: $ADDR, port: $PORT, ana: {1: optimized}, referrals: [{address: $ADDR2, port: $PORT}]}
  - {id: 2, address: $ADDR2, port: $PORT, ana: {1: non_optimized}}
subsystems:
  - nqn: $nqn
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: /data/referrals.img, size: 64MiB}]
CFG
	start_target /tmp/tgt.yaml
fi
nvme discover -t rdma -a "$ADDR" -s "$PORT" | tee "$RESULTS/$SCENARIO-discover.txt" || fail "nvme discover at A"
nvme discover -t rdma -a "$ADDR" -s "$PORT" -o json >"$RESULTS/$SCENARIO-discover.json" || fail "nvme discover -o json at A"
# nvme-cli names a referral's subtype (1) "discovery subsystem referral";
# A's own discovery subsystem (3) is "current discovery subsystem".
jqs --arg a "$ADDR2" --arg a1 "$ADDR" --arg n "$nqn" "$(<"$RESULTS/$SCENARIO-discover.json")" \
	'[.records[] | select(.traddr == $a)]' '[.records[] | select(.traddr == $a1 and .subnqn == $n)] | length'
referral=${JQ[0]} own=${JQ[1]}
echo "entries with B's address: $referral"
jqs "$referral" length '.[0].subtype' '.[0].subnqn' '.[0].trsvcid | tonumber'
assert_eq "referral entries for B" "${JQ[0]}" 1
assert_eq "referral subtype" "${JQ[1]}" "discovery subsystem referral"
assert_eq "referral subsystem NQN" "${JQ[2]}" nqn.2014-08.org.nvmexpress.discovery
assert_eq "referral service ID" "${JQ[3]}" "$PORT"
assert_eq "subsystem entries for A's own port" "$own" 1

if ours; then
	assert_eq "ctl list: A's referral" \
		"$("$NVMEOF_TGT" ctl list -json | jq -r '.ports[] | select(.id == 1) | .referrals | map("\(.address):\(.port)") | join(" ")')" "$ADDR2:$PORT"
fi

nvme connect-all -t rdma -a "$ADDR" -s "$PORT" >&2 || fail "nvme connect-all at A"
wait_for 10 "a live controller through A" ctrl_live_at "$nqn" "$ADDR"
wait_for 10 "a live controller through B, found by the referral" ctrl_live_at "$nqn" "$ADDR2"
wait_dev "$nqn" 1 >/dev/null
assert_eq "namespace block devices of $nqn" "$(ns_heads "$nqn")" 1
ca=$(ctrl_at "$nqn" "$ADDR")
cb=$(ctrl_at "$nqn" "$ADDR2")
assert_eq "A's path" "$(ana_state "$ca" 1)" optimized
assert_eq "B's path" "$(ana_state "$cb" 1)" non-optimized
nvme disconnect-all >&2
if ours; then stop_target2; fi
stop_target
