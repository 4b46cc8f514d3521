# Planned failover by ANA state, under I/O: with `nvmeof-tgt ctl set ana`
# B's port becomes optimized and A's inaccessible. The host re-reads the
# ANA log (the change notice), the path states in sysfs follow, and I/O
# moves to B without fio seeing an error; A's path carries nothing more,
# through the rest of that run and a verify pass of all it wrote.
# Then back: A optimized, B non-optimized, and a verify pass through A.
daemon_only "runs two nvmeof-tgt daemons"
nqn=nqn.2026-11.io.example:ha
addr2_up
ha_up "$nqn" optimized non_optimized
ctl_a() { "$NVMEOF_TGT" ctl "$@"; }
ha_connect_both "$nqn"
assert_eq "A's path" "$(ana_state "$ca" 1)" optimized
assert_eq "B's path" "$(ana_state "$cb" 1)" non-optimized
b0=$(path_ios "$cb" 1)
fio_verify_bg failover 64M "the failover"
assert_eq "I/Os through B, the non-optimized path, before the failover" $(($(path_ios "$cb" 1) - b0)) 0
ctl_b set ana 2 1 optimized || fail "ctl set ana on B"
ctl_a set ana 1 1 inaccessible || fail "ctl set ana on A"
wait_for 15 "the host seeing A's path inaccessible" ana_state_is "$ca" 1 inaccessible
wait_for 15 "the host seeing B's path optimized" ana_state_is "$cb" 1 optimized
wait_for 10 "A's path drained" eval '[ "$(path_inflight "$ca" 1)" = 0 ]'
a1=$(path_ios "$ca" 1) b1=$(path_ios "$cb" 1)
rc=0
wait "$fio_pid" || rc=$?
assert_eq "fio through the failover (status)" "$rc" 0
# Whatever fio had left after the change went through B; a verify pass of
# everything it wrote then shows all I/O on B, whenever the change landed.
fio_ok on-b "${job[@]}" --verify_only=1
path_ios_above "$cb" 1 $((b1 + 1000)) || fail "the verify pass did not go through B: $(($(path_ios "$cb" 1) - b1)) I/Os"
assert_eq "I/Os through A after it became inaccessible" "$(($(path_ios "$ca" 1) - a1))" 0
echo "ok: $(($(path_ios "$cb" 1) - b1)) I/Os through B after the failover"
assert_eq "ctl list: A's port state of group 1" \
	"$(ctl_a list -json | jq -r '.ports[] | select(.id == 1) | .ana["1"]')" inaccessible
assert_eq "nvmeof_tgt_ana_state on A" "$(metric nvmeof_tgt_ana_state 'state="inaccessible"')" 1

# Back to A.
ctl_a set ana 1 1 optimized || fail "ctl set ana on A"
ctl_b set ana 2 1 non_optimized || fail "ctl set ana on B"
wait_for 15 "the host seeing A's path optimized" ana_state_is "$ca" 1 optimized
wait_for 15 "the host seeing B's path non-optimized" ana_state_is "$cb" 1 non-optimized
a2=$(path_ios "$ca" 1) b2=$(path_ios "$cb" 1)
fio_ok failback "${job[@]}" --verify_only=1
path_ios_above "$ca" 1 $((a2 + 100)) || fail "the verify pass did not go through A"
assert_eq "I/Os through B during the verify pass" "$(($(path_ios "$cb" 1) - b2))" 0
disconnect "$nqn"
stop_target2
stop_target
