# The owner of the gateway group stops (SIGSTOP) under fio write + crc32c
# verify: its lease expires, B fences A's RADOS client and takes over, and
# the host, once its keep alive to A timed out, sends the I/O through B.
# SIGCONT: A finds itself past its local deadline and inaccessible before
# any call to the cluster, then sees its lease calls refused (blocklisted),
# rebuilds its RADOS client and stands by again by itself, inaccessible
# all along; fio ends with 0 errors and a verify pass through B is clean.
# Then an operator blocklists the owner B's client from outside, under
# fio write + verify: A takes the group over, the host's I/O moves to A
# with no error, and B rebuilds its client and stands by, no restart.
daemon_only "the gateway pair is nvmeof-tgt's"
ceph_up
addr2_up
nqn=nqn.2026-11.io.example:gw3
gw_pair "$nqn" gw96 256M
gw_pair_up
ha_connect_both "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=120
a_addr=$(gw_holder_addr gw96)
[ -n "$a_addr" ] || fail "no holder address in the lease object"
fio_verify_bg sigstop 32M "the stop"
t0=$(now_ms)
kill -STOP "$TARGET_PID"
wait_for 40 "B owning group 1" gw_state_is b owner
t1=$(now_ms)
echo "takeover: B owner $((t1 - t0)) ms after SIGSTOP of A"
[ $((t1 - t0)) -lt 15000 ] || fail "takeover took $((t1 - t0)) ms: a lease (6 s) and a try (1.5 s)"
blocklisted "$a_addr" || fail "A's client $a_addr is not in the OSD blocklist"
wait_for 60 "the host seeing B's path optimized" ana_state_is "$cb" 1 optimized
kill -CONT "$TARGET_PID"
wait_for 15 "A standing by again, its client rebuilt" gw_rebuilt a
grep -q "RADOS client is blocklisted" "$RESULTS/$SCENARIO-target.log" || fail "A did not log its refused lease call"
grep -q "rebuilt the ANA group's RADOS client" "$RESULTS/$SCENARIO-target.log" || fail "A did not log its client's rebuild"
assert_eq "A's client rebuilds (metric)" "$(metric nvmeof_tgt_gateway_rebuilds_total)" 1
assert_eq "A's blocklisted lease state metric, once rebuilt" "$(metric nvmeof_tgt_gateway_lease_state 'state="blocklisted"')" 0
rc=0
wait "$fio_pid" || rc=$?
assert_eq "fio through the stop and takeover (status)" "$rc" 0
wait_for 30 "the host's path to A live again" ctrl_live_at "$nqn" "$ADDR"
wait_for 15 "the host seeing A's path inaccessible" ana_state_is "$ca" 1 inaccessible
echo "A's refused cluster calls, from its log:"
grep -c "blocklisted\|ESHUTDOWN\|transport endpoint" "$RESULTS/$SCENARIO-target.log" || true
a1=$(path_ios "$ca" 1) b1=$(path_ios "$cb" 1)
fio_ok verify "${job[@]}" --verify_only=1
path_ios_above "$cb" 1 $((b1 + 100)) || fail "the verify pass did not go through B"
assert_eq "I/Os through A during the verify pass" "$(($(path_ios "$ca" 1) - a1))" 0
assert_eq "A still standing by" "$(gw_state a)" standby

# The operator's blocklist of the owner B, under fio write + verify.
b_addr=$(gw_holder_addr gw96)
[ -n "$b_addr" ] || fail "no holder address in the lease object"
job=(--filename="$dev" --direct=1 --ioengine=libaio --rw=write --bs=64k --iodepth=16 --size=32M
	--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_dump=1 --verify_state_save=0)
b0=$(path_ios "$cb" 1)
fio_ok blocklist "${job[@]}" &
fio_pid=$!
fio_busy_on_b() { gone "$fio_pid" && fail "fio ended before the blocklist"; path_ios_above "$cb" 1 "$1"; }
wait_for 60 "256 I/Os through B" fio_busy_on_b $((b0 + 256))
# Timed from the command's return, when the blocklist is in the OSD map.
ceph_mon "{\"prefix\": \"osd blocklist\", \"blocklistop\": \"add\", \"addr\": \"$b_addr\"}" >/dev/null 2>&1 ||
	fail "osd blocklist add $b_addr"
t0=$(now_ms)
wait_for 30 "B standing by again, its client rebuilt" gw_rebuilt b
t1=$(now_ms)
wait_for 40 "A owning group 1" gw_state_is a owner
t2=$(now_ms)
echo "blocklist of B's client: B standing by again (rebuilt) $((t1 - t0)) ms, A owner $((t2 - t0)) ms after"
# B's lock, renewed up to a renewal (1.5 s) before its client was
# blocklisted, lasts its lease (6 s); A tries every 1.5 s and fences,
# in the emulated guest beside fio: 18 s.
[ $((t2 - t0)) -lt 18000 ] || fail "A took the group $((t2 - t0)) ms after B's blocklist"
assert_eq "B's client rebuilds (metric)" "$(metric_at "$B_METRICS" nvmeof_tgt_gateway_rebuilds_total)" 1
rc=0
wait "$fio_pid" || rc=$?
assert_eq "fio through the blocklist of B and A's takeover (status)" "$rc" 0
assert_eq "B standing by" "$(gw_state b)" standby
disconnect "$nqn"
stop_target2
stop_target
