# Three gateways, one group that prefers A (`preferred: gw-a`,
# `failback_delay: 5`, the 6 s lease), under the versioned-block writer
# (test/e2e/vblock: 1024 blocks of 4 KiB rewritten over and over, 8 writes
# in flight, each carrying its block and a counter):
#   - SIGTERM of the owner A, as `systemctl stop` sends: A makes the group
#     inaccessible, quiesces and flushes it, releases the lease and exits 0;
#     exactly one of B and C takes the group, fencing nobody;
#   - a namespace is added through the owner alone; A restarts without it
#     and stands by, and the owner keeps the group while A does not serve
#     it; once A does, the owner hands the group back to A by a planned
#     release, no sooner than the failback delay after that, fencing
#     nobody;
#   - kill -9 of A: exactly one of B and C takes the group, fencing A.
# After each, exactly one daemon owns the group, the host has exactly one
# optimized path, the writer saw no I/O error, and every block holds its
# newest acknowledged version: no write of an old owner landed after one
# of the new owner's.
daemon_only "the gateway pair is nvmeof-tgt's"
ceph_up
addr2_up
ADDR3=10.99.0.3
TARGET3_PID=""
trap 'cleanup; [ -z "$TARGET3_PID" ] || kill -9 "$TARGET3_PID" 2>/dev/null; ip addr del "$ADDR3/24" dev eth0 2>/dev/null || true' EXIT
ip addr add "$ADDR3/24" dev eth0 || fail "adding $ADDR3 to eth0"
wait_for 10 "an rxe GID for $ADDR3" rxe_has_gid "$ADDR3"
nqn=nqn.2026-11.io.example:gw2
gw_pair "$nqn" gw95 64M
sed -i 's/groups: \[1\]}/groups: [{id: 1, preferred: gw-a}], failback_delay: 5}/' /tmp/a.yaml /tmp/b.yaml
grep -q "preferred: gw-a" /tmp/b.yaml || fail "no failback settings in the configurations"
# C: B's configuration on the third address, with its own admin socket,
# metrics address, state file and controller IDs.
sed -e 's/b\.sock/c.sock/; s/b-state/c-state/; s/:9751/:9752/; s/gw-b/gw-c/' \
	-e "s/{id: 2, address: $ADDR2,/{id: 3, address: $ADDR3,/; s/cntlid_min: 100/cntlid_min: 200/; s/cntlid_max: 199/cntlid_max: 299/" \
	/tmp/b.yaml >/tmp/c.yaml
grep -q "address: $ADDR3" /tmp/c.yaml || fail "C's configuration has no port on $ADDR3"
start_target /tmp/a.yaml
wait_for 30 "A owning group 1" gw_state_is a owner
start_target2 /tmp/b.yaml
log_end "$RESULTS/$SCENARIO-target3.log"
C_FROM=$LOG_END
"$NVMEOF_TGT" -config /tmp/c.yaml >>"$RESULTS/$SCENARIO-target3.log" 2>&1 &
TARGET3_PID=$!
wait_for 30 "daemon C answering discovery on $ADDR3" target_answers "$RESULTS/$SCENARIO-target3.log" "$ADDR3" "$TARGET3_PID" "$C_FROM"
wait_for 10 "B standing by" gw_state_is b standby
wait_for 10 "C standing by" gw_state_is c standby
ha_connect_both "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=120
cc=$(connect_at "$ADDR3" "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=120)
assert_eq "A's path" "$(ana_state "$ca" 1)" optimized
assert_eq "B's path" "$(ana_state "$cb" 1)" inaccessible
assert_eq "C's path" "$(ana_state "$cc" 1)" inaccessible

# optimized_paths: the live paths the host holds optimized (a lost
# controller's path keeps its last state).
optimized_paths() {
	local c n=0
	for c in "$ca" "$cb" "$cc"; do
		[ "$(cat "/sys/class/nvme/$c/state" 2>/dev/null)" = live ] && ana_state_is "$c" 1 optimized && n=$((n + 1))
	done
	echo "$n"
}
# survivor_path: the host holds B's or C's path optimized (sysfs only:
# cheap enough to time the takeover by).
survivor_path() { ana_state_is "$cb" 1 optimized || ana_state_is "$cc" 1 optimized; }
# survivor_owns: exactly one of B and C owns the group, the other stands
# by, and the host's only optimized path is the owner's. Sets survivor (b
# or c) and its controller sc.
survivor_owns() {
	case $(gw_state b)/$(gw_state c) in
	owner/standby) survivor=b sc=$cb ;;
	standby/owner) survivor=c sc=$cc ;;
	*) return 1 ;;
	esac
	[ "$(optimized_paths)" = 1 ] && ana_state_is "$sc" 1 optimized
}
# writes_through_survivor N: N writes through the survivor's path, with
# one owner and one optimized path at every look.
writes_through_survivor() {
	local n1
	n1=$(path_ios "$sc" 1)
	until path_ios_above "$sc" 1 $((n1 + $1)); do
		gone "$vb_pid" && fail "the writer ended: $(tail -5 "$VB_LOG")"
		survivor_owns || fail "not one owner: B $(gw_state b), C $(gw_state c), $(optimized_paths) optimized paths"
		sleep 0.2
	done
}
# group_counts DAEMON: its fencings and failbacks of group 1, as
# "FENCINGS FAILBACKS", from its metrics.
group_counts() {
	gw_addr "$1"
	http_get "$GW_ADDR" /metrics || fail "scraping $GW_ADDR/metrics"
	echo "$(metric_in nvmeof_tgt_gateway_fencings_total 'group="1"') $(metric_in nvmeof_tgt_gateway_failbacks_total 'group="1"')"
}

# SIGTERM of the owner.
vblock_bg "$ca" "the SIGTERM"
t0=$(now_ms)
stop_target # SIGTERM; exit status 0 within 10 s
wait_for 20 "the host seeing B's or C's path optimized" survivor_path
t1=$(now_ms)
wait_for 10 "one of B and C owning the group, the host's only optimized path" survivor_owns
echo "handover: the host saw $survivor's path optimized $((t1 - t0)) ms after SIGTERM of A"
# A released the group as it stopped: faster than a lease (6 s) expiring.
[ $((t1 - t0)) -lt 6000 ] || fail "handover took $((t1 - t0)) ms, as long as a lease expiring"
assert_eq "$survivor's fencings, failbacks after A's release" "$(group_counts $survivor)" "0 0"
writes_through_survivor 200
vblock_stop
echo "SIGTERM of the owner: the writer's longest write took $vb_longest_ms ms"
[ "$vb_longest_ms" -lt 10000 ] || fail "a write took $vb_longest_ms ms through the handover"
vblock_verify "after SIGTERM of the owner"

# A namespace added through the owner alone; A restarts without it and
# stands by. The owner does not hand the group to A while A does not serve
# it (it would vanish from the hosts); once A does too, the group comes
# back to A after the delay.
ns2=(add namespace "$nqn" -nsid 2 -backend rbd -pool "$CEPH_POOL" -image gw95-2 -create -size 16MiB
	-uuid 6e2d9f4f-3b58-4c7f-8d12-4a3f5e6b7c8d -ana-group 1)
"$NVMEOF_TGT" ctl -socket "/run/nvmeof-tgt/$survivor.sock" "${ns2[@]}" >/dev/null || fail "ctl add namespace 2 through $survivor"
survivor_log=$RESULTS/$SCENARIO-target$([ "$survivor" = b ] && echo 2 || echo 3).log
vblock_bg "$sc" "A's restart"
"$NVMEOF_TGT" -config /tmp/a.yaml >>"$RESULTS/$SCENARIO-target.log" 2>&1 &
TARGET_PID=$!
# (ctl list's since, once the metric shows the state: ctl and jq are two
# process starts a poll.)
a_standby() { gw_state_is a standby && standby_ms=$(gw_since_ms a standby); }
a_owner() { gw_state_is a owner && owner_ms=$(gw_since_ms a owner); }
wait_for 90 "A standing by" a_standby
wait_for 20 "$survivor finding that A serves other namespaces" grep -q "serves other namespaces in the ANA group" "$survivor_log"
assert_eq "A's state while it lacks namespace 2" "$(gw_state a)" standby
added_ms=$(now_ms)
"$NVMEOF_TGT" ctl "${ns2[@]}" >/dev/null || fail "ctl add namespace 2 through A"
wait_for 20 "A owning the group again" a_owner
# Timed by A's own clock (ctl list's since), not by when this script saw
# it: a busy guest's polls lag by seconds. The owner counts the delay from
# the first announcement of A with namespace 2 it reads, which A makes at
# its next try, and hands back at its next renewal (a quarter lease) after
# that.
failback_ms=$((owner_ms - added_ms))
echo "failback: A owned the group $failback_ms ms after it served namespace 2 too, $((owner_ms - standby_ms)) ms after it stood by (failback_delay 5 s)"
[ "$failback_ms" -ge 5000 ] || fail "failback $failback_ms ms after A served the same namespaces, before the 5 s delay"
# At most A's next try (a quarter lease, 1.5 s), the owner's next look
# (1.5 s), the delay (5 s) and its next renewal (1.5 s): 9.5 s, and the
# busy guest's lag.
[ "$failback_ms" -lt 16000 ] || fail "failback $failback_ms ms after A served the same namespaces: the delay is 5 s"
wait_for 30 "the host's path to A live again" ctrl_live_at "$nqn" "$ADDR"
wait_for 15 "the host seeing A's path optimized" ana_state_is "$ca" 1 optimized
wait_for 10 "the host seeing $survivor's path inaccessible" ana_state_is "$sc" 1 inaccessible
assert_eq "optimized paths after the failback" "$(optimized_paths)" 1
assert_eq "$survivor's fencings, failbacks after the failback" "$(group_counts $survivor)" "0 1"
assert_eq "A's fencings" "$(metric nvmeof_tgt_gateway_fencings_total)" 0
a1=$(path_ios "$ca" 1)
wait_for 60 "200 writes through A" vblock_busy_on "$ca" $((a1 + 200)) "the end"
vblock_stop
echo "failback: the writer's longest write took $vb_longest_ms ms"
[ "$vb_longest_ms" -lt 10000 ] || fail "a write took $vb_longest_ms ms through the failback"
vblock_verify "after the failback"

# kill -9 of the owner.
vblock_bg "$ca" "the kill"
t0=$(now_ms)
kill9_target
wait_for 40 "the host seeing B's or C's path optimized" survivor_path
t1=$(now_ms)
wait_for 10 "one of B and C owning the group, the host's only optimized path" survivor_owns
echo "takeover: the host saw $survivor's path optimized $((t1 - t0)) ms after kill -9 of A"
[ $((t1 - t0)) -lt 15000 ] || fail "takeover took $((t1 - t0)) ms: a lease (6 s) and a try (1.5 s), and the host's reaction"
writes_through_survivor 200
fenced=0
for g in b c; do
	read -r f _ <<<"$(group_counts $g)"
	fenced=$((fenced + f))
done
assert_eq "fencings by B and C" "$fenced" 1
vblock_stop
echo "kill -9 of the owner: the writer's longest write took $vb_longest_ms ms"
[ "$vb_longest_ms" -lt 25000 ] || fail "a write took $vb_longest_ms ms through the takeover"
vblock_verify "after kill -9 of the owner"
disconnect "$nqn"
kill -TERM "$TARGET3_PID"
wait_for 10 "C exiting after SIGTERM" gone "$TARGET3_PID"
TARGET3_PID=""
stop_target2
