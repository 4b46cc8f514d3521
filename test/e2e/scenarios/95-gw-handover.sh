# Planned handover of the gateway pair under I/O: `ctl gateway release 1`
# on the owner makes its path inaccessible and releases the lease; the
# peer takes it at its next try, without fencing anyone; fio (write and
# crc32c verify on the multipath device) sees no error. Then back again,
# and a verify pass through A.
daemon_only "the gateway pair is nvmeof-tgt's"
ceph_up
addr2_up
nqn=nqn.2026-11.io.example:gw2
gw_pair "$nqn" gw95 256M
start_target /tmp/a.yaml
wait_for 30 "A owning group 1" gw_state_is a owner
start_target2 /tmp/b.yaml
wait_for 10 "B standing by" gw_state_is b standby
ha_connect_both "$nqn"
assert_eq "A's path" "$(ana_state "$ca" 1)" optimized
assert_eq "B's path" "$(ana_state "$cb" 1)" inaccessible
bl_count() { timeout 30 ceph --conf "$CEPH_CONF" --id admin --keyring "$CEPH_ADMIN_KEYRING" osd blocklist ls 2>/dev/null | grep -c ':0/' || true; }
bl0=$(bl_count)
fio_verify_bg handover 128M "the handover"
t0=$(now_ms)
"$NVMEOF_TGT" ctl gateway release 1 || fail "ctl gateway release on A"
assert_eq "A's lease right after the release" "$(gw_state a)" standby
wait_for 15 "the host seeing B's path optimized" ana_state_is "$cb" 1 optimized
t1=$(now_ms)
echo "handover: the host saw B optimized $((t1 - t0)) ms after the release"
# B hears the release through its watch on the lease object and tries at
# once, not at its next try; what remains is the lock, record and ANA calls
# on an OSD busy with fio, and the host's reaction. Nothing waits for the
# lease to expire (10 s).
grep -q "gateway lease object notified" "$RESULTS/$SCENARIO-target2.log" || fail "B was not notified of the release"
[ $((t1 - t0)) -lt 10000 ] || fail "the handover took $((t1 - t0)) ms"
wait_for 10 "the host seeing A's path inaccessible" ana_state_is "$ca" 1 inaccessible
b1=$(path_ios "$cb" 1)
gone "$fio_pid" && fail "fio ended before I/O could be seen moving (make the job longer)"
wait_for 60 "200 I/Os through B" path_ios_above "$cb" 1 $((b1 + 200))
rc=0
wait "$fio_pid" || rc=$?
assert_eq "fio through the handover (status)" "$rc" 0
assert_eq "B's fencings" "$(metric_at "$B_METRICS" nvmeof_tgt_gateway_fencings_total)" 0
assert_eq "OSD blocklist entries" "$(bl_count)" "$bl0"
"$NVMEOF_TGT" ctl gateway release 1 >/dev/null 2>&1 && fail "A released a group it no longer owns"

# Back to A (after A's hold-off: a lease time after its own release).
ctl_b gateway release 1 || fail "ctl gateway release on B"
wait_for 30 "A owning group 1 again" gw_state_is a owner
wait_for 15 "the host seeing A's path optimized" ana_state_is "$ca" 1 optimized
wait_for 15 "the host seeing B's path inaccessible" ana_state_is "$cb" 1 inaccessible
a2=$(path_ios "$ca" 1) b2=$(path_ios "$cb" 1)
fio_ok back "${job[@]}" --verify_only=1
path_ios_above "$ca" 1 $((a2 + 100)) || fail "the verify pass did not go through A"
assert_eq "I/Os through B during the verify pass" "$(($(path_ios "$cb" 1) - b2))" 0
assert_eq "A's fencings" "$(metric nvmeof_tgt_gateway_fencings_total)" 0
assert_eq "OSD blocklist entries" "$(bl_count)" "$bl0"
disconnect "$nqn"
stop_target2
stop_target
