# The gateway pair: two daemons export one RBD image as one subsystem;
# the holder of ANA group 1's lease in RADOS (A, started first) is
# optimized, the other inaccessible. fio writes with crc32c verify on the
# multipath device; kill -9 of A: B takes the lease once it expired,
# blocklists A's RADOS client, turns optimized, and fio ends with 0
# errors. The takeover time (kill to the host seeing B optimized) is
# printed and must stay under the lease (6 s) and a try (1.5 s), plus the
# host's own reaction and the busy guest's lag, so the bound checked is 15 s. Then A restarts and rejoins as inaccessible, and
# stays so: no flapping.
# Reservations through the takeover: the writer's host registers and takes
# Write Exclusive through A, the owner; B, taking the group, reads them
# from the image, so its report shows the same holder and keys, a second
# host's write through B gets Reservation Conflict, and the writer's I/O
# goes on.
daemon_only "the gateway pair is nvmeof-tgt's"
ceph_up
addr2_up
nqn=nqn.2026-11.io.example:gw1
gw_pair "$nqn" gw94 256M
gw_pair_up
ha_connect_both "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=120
assert_eq "A's path" "$(ana_state "$ca" 1)" optimized
assert_eq "B's path" "$(ana_state "$cb" 1)" inaccessible
a_addr=$(gw_holder_addr gw94)
[ -n "$a_addr" ] || fail "no holder address in the lease object"
echo "A's RADOS client: $a_addr"

nvme resv-register "/dev/$ca" -n 1 --nrkey=161 --rrega=0 >/dev/null || fail "the writer's host registering through A"
nvme resv-acquire "/dev/$ca" -n 1 --crkey=161 --rtype=1 --racqa=0 >/dev/null || fail "the writer's host taking Write Exclusive through A"
resv_a=$(resv_report "/dev/$ca")
[[ $resv_a == *" 1 161@"*"*" ]] || fail "the report through A: '$resv_a', want Write Exclusive held by key 161"
echo "reservation through A: $resv_a"

fio_verify_bg kill9 32M "the kill"
t0=$(now_ms)
kill9_target
wait_for 40 "the host seeing B's path optimized" ana_state_is "$cb" 1 optimized
t1=$(now_ms)
echo "takeover: the host saw B optimized $(((t1 - t0) / 1000)).$(((t1 - t0) % 1000 / 100)) s after kill -9 of A"
[ $((t1 - t0)) -lt 15000 ] || fail "takeover took $((t1 - t0)) ms"
rc=0
wait "$fio_pid" || rc=$?
assert_eq "fio through the takeover (status)" "$rc" 0
blocklisted "$a_addr" || fail "A's client $a_addr is not in the OSD blocklist"
echo "ok: A's client $a_addr is blocklisted"
assert_eq "the reservation through B after the takeover" "$(resv_report "/dev/$cb")" "$resv_a"
assert_eq "B's takeovers" "$(metric_at "$B_METRICS" nvmeof_tgt_gateway_takeovers_total)" 1
assert_eq "B's fencings" "$(metric_at "$B_METRICS" nvmeof_tgt_gateway_fencings_total)" 1

# A restarts: a new client, standby, inaccessible on the host, for good.
start_target /tmp/a.yaml
wait_for 10 "A standing by" gw_state_is a standby
wait_for 30 "the host's path to A live again" ctrl_live_at "$nqn" "$ADDR"
wait_for 15 "the host seeing A's path inaccessible" ana_state_is "$ca" 1 inaccessible
# A lease and a half by the clock (B renews six times, A tries six
# times), the states checked about every second: any flapping shows.
calm_until=$((SECONDS + 9))
while [ "$SECONDS" -lt "$calm_until" ]; do
	gw_state_is a standby || fail "A left standby after its restart: $(gw_state a)"
	gw_state_is b owner || fail "B lost the group after A's restart: $(gw_state b)"
	nap 1
done
assert_eq "A's takeovers since its restart" "$(metric nvmeof_tgt_gateway_takeovers_total)" 0
assert_eq "B's takeovers" "$(metric_at "$B_METRICS" nvmeof_tgt_gateway_takeovers_total)" 1
assert_eq "A's path, after 9 s" "$(ana_state "$ca" 1)" inaccessible
# B still enforces the reservation it read at the takeover (checked after
# A's restart, which it must not delay past the host's ctrl_loss_tmo): a
# second host, on B only (through /dev/nvme-fabrics: nvme-cli would take it
# for a duplicate of the writer's controller), cannot write; the holder
# can, beyond fio's range.
h2=$(connect_host "$ADDR2" "$nqn" nqn.2014-08.org.nvmexpress:uuid:bbbbbbbb-0000-0000-0000-000000000094 10)
h2=${h2#/dev/}
blk=/tmp/resv94-blk past_fio=$((200 << 20 >> 9))
head -c 512 /dev/urandom >"$blk"
if out=$(nvme write "/dev/$h2" -n 1 -s "$past_fio" -c 0 -z 512 -d "$blk" 2>&1); then
	fail "host 2's write through B succeeded under the writer's Write Exclusive"
fi
grep -qi 'reservation.conflict' <<<"$out" || fail "host 2's write through B: $out (want Reservation Conflict)"
echo "ok: host 2's write through B -> Reservation Conflict"
out=$(nvme write "/dev/$cb" -n 1 -s "$past_fio" -c 0 -z 512 -d "$blk" 2>&1) || fail "the holder's write through B: $out"
nvme disconnect -d "$h2" >/dev/null || fail "disconnecting host 2"
b0=$(path_ios "$cb" 1)
fio_ok verify "${job[@]}" --verify_only=1
path_ios_above "$cb" 1 $((b0 + 100)) || fail "the verify pass did not go through B"
disconnect "$nqn"
stop_target2
stop_target
