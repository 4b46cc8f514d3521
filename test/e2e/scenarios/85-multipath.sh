# Native multipath across two daemons under I/O: fio writes with crc32c
# checksums and verifies them through the multipath device while the
# daemon with the optimized path (A) is killed with -9. I/O moves to B's
# path and fio ends without an error; A restarted, its path comes back
# live and optimized, I/O returns to it (failback), and a second verify
# pass of everything written reads clean through it.
daemon_only "runs two nvmeof-tgt daemons"
nqn=nqn.2026-11.io.example:ha
addr2_up
ha_up "$nqn" optimized non_optimized
# Reconnect attempts every second, for a minute: long enough to outlast
# the restart.
ha_connect_both "$nqn" --ctrl-loss-tmo=60 --reconnect-delay=1
assert_eq "A's path" "$(ana_state "$ca" 1)" optimized
assert_eq "B's path" "$(ana_state "$cb" 1)" non-optimized
a0=$(path_ios "$ca" 1) b0=$(path_ios "$cb" 1)
# Kill A once fio has written a quarter of the run, all through A.
fio_verify_bg mp 64M "the kill"
b1=$(path_ios "$cb" 1)
kill9_target
echo "A killed after $(($(path_ios "$ca" 1) - a0)) I/Os through it"
assert_eq "I/Os through B, the non-optimized path, before the kill" $((b1 - b0)) 0
rc=0
wait "$fio_pid" || rc=$?
assert_eq "fio through the failover (status)" "$rc" 0
path_ios_above "$cb" 1 $((b1 + 100)) || fail "I/O did not move to B's path: $(($(path_ios "$cb" 1) - b1)) I/Os after the kill"
echo "ok: $(($(path_ios "$cb" 1) - b1)) I/Os through B after the kill"
ctrl_state_is "$ca" 'connecting|resetting' || fail "A's controller is $(cat /sys/class/nvme/$ca/state), not reconnecting"

# Failback: A comes back, the host reconnects, reads A's ANA log and sends
# I/O through it again.
start_target /tmp/a.yaml
wait_for 30 "A's controller live again" ctrl_state_is "$ca" '^live$'
wait_for 15 "A's path optimized again" ana_state_is "$ca" 1 optimized
a1=$(path_ios "$ca" 1) b2=$(path_ios "$cb" 1)
fio_ok mp-verify "${job[@]}" --verify_only=1
path_ios_above "$ca" 1 $((a1 + 100)) || fail "the verify pass did not go through A after failback"
assert_eq "I/Os through B during the verify pass" "$(($(path_ios "$cb" 1) - b2))" 0
echo "ok: verify pass of $FIO_READ bytes through A after failback"
disconnect "$nqn"
stop_target2
stop_target
