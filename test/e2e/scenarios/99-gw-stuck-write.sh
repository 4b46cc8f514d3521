# e2e-timeout: 420
# A planned handover while the owner's writes are stuck past their
# timeout, under the versioned-block writer. The image is in pool apart,
# on osd.1 alone (cluster.sh add-osd); the lease object stays in the rbd
# pool, on osd.0. The packets of the owner A's connection to osd.1 are
# held in the network (tc: a plug qdisc on lo, for A's socket alone), so
# its writes time out in the cluster (rados_osd_op_timeout, 10 s) while its
# lease calls go through. librados cancels a timed-out write only on A's
# side: the message still sits in the network and lands once it heals. So:
#   - A counts those writes as unsettled (nvmeof_tgt_unsettled_writes);
#   - the host drops its path to A (nothing new reaches A), A's commands
#     in flight end, and the operator releases the group on A;
#   - the release stops short ("writes timed out in the cluster"): A
#     leaves its lock to expire, and B takes the group, fencing A;
#   - the writer goes on through B over every block; then the network
#     lets A's held packets go, and its stuck writes reach the OSD, which
#     refuses them (A is blocklisted);
#   - every block holds its newest acknowledged version, and A rebuilds
#     its client and stands by, its count back at 0.
# Without the rule (a timed-out write counted as finished) the release is
# clean, B fences nobody, and A's old writes land over B's newer ones.
daemon_only "the gateway pair is nvmeof-tgt's"
ceph_apart_up
addr2_up
nqn=nqn.2026-11.io.example:gw9
GW_IMAGE_POOL=$CEPH_POOL_APART gw_pair "$nqn" gw99 64M
gw_pair_up
ha_connect_both "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=120 --keep-alive-tmo=30
a_addr=$(gw_holder_addr gw99)
[ -n "$a_addr" ] || fail "no holder address in the lease object"
vblock_bg "$ca" "the stuck writes"
hold_osd_traffic "$TARGET_PID" 1
wait_for 30 "a write of A's held in the network" held_write
# The host drops its path to A meanwhile, so nothing new reaches A; its
# removal waits for the writes A has (they time out in the cluster). A
# keep alive timeout longer than theirs keeps A's controller up till then.
t0=$(now_ms)
nvme disconnect -d "$ca" >/dev/null &
disconnect_pid=$!
unsettled() { metric nvmeof_tgt_unsettled_writes; }
in_flight() { metric nvmeof_tgt_commands_in_flight; }
above_zero() { [ "$("$@")" -gt 0 ] 2>/dev/null; }
at_zero() { [ "$("$@")" = 0 ]; }
wait_for 40 "a write of A's timing out in the cluster" above_zero unsettled
wait "$disconnect_pid" || fail "nvme disconnect of A's controller $ca"
echo "the host dropped its path to A in $(($(now_ms) - t0)) ms"
wait_for 30 "A's commands in flight ending (timed out)" at_zero in_flight
echo "A: $(unsettled) unsettled write(s), no command in flight; releasing the group"
"$NVMEOF_TGT" ctl gateway release 1 || fail "ctl gateway release 1 on A"
wait_for 20 "A's release stopping short" grep -q "writes timed out in the cluster" "$RESULTS/$SCENARIO-target.log"
wait_for 40 "B owning group 1" gw_state_is b owner
blocklisted "$a_addr" || fail "A's client $a_addr is not in the OSD blocklist"
assert_eq "B's fencings" "$(metric_at "$B_METRICS" nvmeof_tgt_gateway_fencings_total)" 1
wait_for 60 "the host seeing B's path optimized" ana_state_is "$cb" 1 optimized
# A full round of the writer's 1024 blocks through B: every block A may
# still hold a write for gets a newer version.
b0=$(path_ios "$cb" 1)
wait_for 120 "1200 writes through B" vblock_busy_on "$cb" $((b0 + 1200)) "A's packets passing again"
release_osd_traffic
# Writes through B after the stuck ones arrived, then the check.
b1=$(path_ios "$cb" 1)
wait_for 60 "200 more writes through B" vblock_busy_on "$cb" $((b1 + 200)) "the check"
vblock_stop
vblock_verify "after A's stuck writes reached the OSD"
wait_for 60 "A standing by again, its client rebuilt" gw_rebuilt a
assert_eq "A's unsettled writes once rebuilt" "$(unsettled)" 0
assert_eq "A's fencings" "$(metric nvmeof_tgt_gateway_fencings_total)" 0
