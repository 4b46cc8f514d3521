# The nemesis soak's guest side (test/soak/nemesis.sh runs it through the
# e2e harness; CI does not): a gateway pair (A and B, one RBD image, a 10 s
# lease) and the host writing versioned blocks on the multipath device
# (test/e2e/vblock), under a random fault to the group's owner, one after
# another, for NEMESIS_SECONDS (1800 by default). The image is on osd.1,
# the lease object on osd.0 (test/ceph/cluster.sh add-osd). The faults,
# taken in a random order from a shuffled bag of all seven so that each
# comes as often:
#
#	kill9     kill -9 of the owner
#	stopcont  SIGSTOP of the owner until the peer owns the group, then SIGCONT
#	term      SIGTERM of the owner (systemctl stop)
#	release   ctl gateway release on the owner (planned)
#	osd       both OSDs stopped for 15 s, then started
#	blocklist the owner's RADOS client blocklisted from outside
#	stuck     the owner's packets to osd.1 held in the network until its
#	          writes time out in the cluster; ctl gateway release on it
#	          (which stops short: the peer fences it); the packets let go
#	          once the peer wrote every block again
#
# After each fault: one owner, a stopped, killed or blocklisted daemon
# restarted, both paths live; the writer stopped (its writes in flight
# complete), no I/O error, and every block at its newest acknowledged
# version; the writer's slowest write is that fault's path outage. At the
# end: the faults by kind, and the longest outage of each.
daemon_only "the gateway pair is nvmeof-tgt's"
ceph_apart_up
addr2_up
nqn=nqn.2026-11.io.example:nemesis
GW_IMAGE_POOL=$CEPH_POOL_APART gw_pair "$nqn" nemesis 64M
gw_pair_up
# The host keeps reconnecting a lost path for 10 min: no fault here takes
# a daemon away for longer.
ha_connect_both "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=600
duration=${NEMESIS_SECONDS:-1800}
seed=${NEMESIS_SEED:-$((RANDOM * 32768 + RANDOM))}
RANDOM=$seed
echo "nemesis: $duration s, seed $seed (NEMESIS_SEED repeats the order)"

# NEMESIS_KINDS narrows the bag to some of them ("stuck release").
read -r -a kinds <<<"${NEMESIS_KINDS:-kill9 stopcont term release osd blocklist stuck}"
declare -A count longest
for k in "${kinds[@]}"; do count[$k]=0 longest[$k]=0; done
bag=()

# next_kind: sets kind, the next fault from the bag, refilled shuffled.
next_kind() {
	if [ "${#bag[@]}" = 0 ]; then
		bag=("${kinds[@]}")
		local i j t
		for ((i = ${#bag[@]} - 1; i > 0; i--)); do
			j=$((RANDOM % (i + 1)))
			t=${bag[i]} bag[i]=${bag[j]} bag[j]=$t
		done
	fi
	kind=${bag[0]}
	bag=("${bag[@]:1}")
}

pid_of() { if [ "$1" = a ]; then echo "$TARGET_PID"; else echo "$TARGET2_PID"; fi; }
ctrl_of_gw() { if [ "$1" = a ]; then echo "$ca"; else echo "$cb"; fi; }
addr_of() { if [ "$1" = a ]; then echo "$ADDR"; else echo "$ADDR2"; fi; }
metrics_of() { if [ "$1" = a ]; then echo 127.0.0.1:9750; else echo "$B_METRICS"; fi; }
unsettled_on() { [ "$(metric_at "$(metrics_of "$1")" nvmeof_tgt_unsettled_writes)" -gt 0 ] 2>/dev/null; }
# fenced_since DAEMON N: DAEMON's client was fenced after it had rebuilt
# N times: it stands blocklisted now, or has rebuilt since (which may take
# less than a poll, so the state alone can be missed).
rebuilds_of() { metric_at "$(metrics_of "$1")" nvmeof_tgt_gateway_rebuilds_total; }
fenced_since() { gw_state_is "$1" blocklisted || [ "$(rebuilds_of "$1")" -gt "$2" ] 2>/dev/null; }
release_on() { if [ "$1" = a ]; then "$NVMEOF_TGT" ctl gateway release 1; else ctl_b gateway release 1; fi; }
running() { local p; p=$(pid_of "$1"); [ -n "$p" ] && ! gone "$p"; }
start_gw() { if [ "$1" = a ]; then start_target /tmp/a.yaml; else start_target2 /tmp/b.yaml; fi; }
stop_gw() { if [ "$1" = a ]; then stop_target; else stop_target2; fi; }
kill9_gw() { if [ "$1" = a ]; then kill9_target; else kill9_target2; fi; }

# owner_is: exactly one daemon owns the group; sets owner and peer.
owner_is() {
	local sa sb
	sa=$(gw_state a) sb=$(gw_state b)
	case $sa/$sb in
	owner/standby | owner/blocklisted | owner/) owner=a peer=b ;;
	standby/owner | blocklisted/owner | /owner) owner=b peer=a ;;
	*) return 1 ;;
	esac
}

# settled: one owner, both daemons up (the other standing by), both host
# paths live, the owner's optimized.
settled() {
	owner_is && gw_state_is "$peer" standby &&
		ctrl_live_at "$nqn" "$ADDR" && ctrl_live_at "$nqn" "$ADDR2" &&
		ana_state_is "$(ctrl_of_gw "$owner")" 1 optimized && ana_state_is "$(ctrl_of_gw "$peer")" 1 inaccessible
}

# healed: restart a daemon that is gone or blocklisted (stopping it
# first), then settled.
healed() {
	local g
	for g in a b; do
		if running "$g" && gw_state_is "$g" blocklisted; then
			stop_gw "$g"
		fi
		running "$g" || start_gw "$g"
	done
	settled
}

# fault KIND: inflict it on the owner; returns once it has taken effect.
fault() {
	local p
	p=$(pid_of "$owner")
	case $1 in
	kill9) kill9_gw "$owner" ;;
	stopcont)
		local r0
		r0=$(rebuilds_of "$owner")
		kill -STOP "$p"
		wait_for 60 "$peer owning the group while $owner is stopped" gw_state_is "$peer" owner
		kill -CONT "$p"
		wait_for 30 "$owner blocklisted after SIGCONT" fenced_since "$owner" "$r0"
		;;
	term) stop_gw "$owner" ;;
	release) release_on "$owner" || fail "ctl gateway release on $owner" ;;
	osd)
		local id
		for id in 1 0; do
			"$E2E_DIR/../ceph/cluster.sh" stop-osd "$CEPH_DIR" $id >>"$RESULTS/$SCENARIO-ceph.log" 2>&1 || fail "stopping osd.$id"
		done
		sleep 15 # down past the owner's step-down (7 s) and its lease
		for id in 0 1; do
			"$E2E_DIR/../ceph/cluster.sh" start-osd "$CEPH_DIR" $id >>"$RESULTS/$SCENARIO-ceph.log" 2>&1 ||
				fail "starting osd.$id: $(tail -5 "$RESULTS/$SCENARIO-ceph.log")"
		done
		;;
	stuck)
		hold_osd_traffic "$p" 1
		wait_for 30 "a write of $owner's held in the network" held_write
		wait_for 40 "a write of $owner's timing out in the cluster" unsettled_on "$owner"
		release_on "$owner" || fail "ctl gateway release on $owner"
		wait_for 60 "$peer owning the group, fencing $owner" gw_state_is "$peer" owner
		local pc w
		pc=$(ctrl_of_gw "$peer")
		w=$(path_ios "$pc" 1)
		wait_for 120 "every block written again through $peer" vblock_busy_on "$pc" $((w + 1100)) "the held packets' release"
		release_osd_traffic
		HELD_PORTS=""
		;;
	blocklist)
		local addr r0
		r0=$(rebuilds_of "$owner")
		addr=$(gw_holder_addr nemesis)
		[ -n "$addr" ] || fail "no holder address in the lease object"
		timeout 30 ceph --conf "$CEPH_CONF" --id admin --keyring "$CEPH_ADMIN_KEYRING" osd blocklist add "$addr" >/dev/null 2>&1 ||
			fail "ceph osd blocklist add $addr"
		wait_for 60 "$owner blocklisted after its client was" fenced_since "$owner" "$r0"
		;;
	esac
}

n=0 worst=0 worst_kind=""
end=$((SECONDS + duration))
while [ "$SECONDS" -lt "$end" ]; do
	next_kind
	n=$((n + 1))
	# A daemon fenced late (after the OSD came back, its peer took the
	# lease and fenced it) is restarted here.
	wait_for 120 "one owner, a standby and both paths live before fault $n" healed
	oc=$(ctrl_of_gw "$owner")
	vblock_bg "$oc" "fault $n"
	# A random amount of writing first: 0 to 400 more through the owner.
	w=$(path_ios "$oc" 1)
	wait_for 120 "writes through $owner before fault $n" vblock_busy_on "$oc" $((w + RANDOM % 400)) "fault $n"
	t0=$(now_ms)
	echo "fault $n at $SECONDS s: $kind on $owner"
	fault "$kind"
	wait_for 120 "an owner of the group after $kind" owner_is
	wait_for 120 "one owner, a standby and both paths live after $kind" healed
	echo "  settled $(($(now_ms) - t0)) ms later: $owner owner"
	oc=$(ctrl_of_gw "$owner")
	w=$(path_ios "$oc" 1)
	wait_for 60 "200 writes through $owner after fault $n" vblock_busy_on "$oc" $((w + 200)) "the check"
	vblock_stop >/dev/null
	vblock_verify "  after fault $n ($kind)"
	echo "  the writer's longest write: $vb_longest_ms ms"
	count[$kind]=$((count[$kind] + 1))
	[ "$vb_longest_ms" -le "${longest[$kind]}" ] || longest[$kind]=$vb_longest_ms
	[ "$vb_longest_ms" -le "$worst" ] || { worst=$vb_longest_ms worst_kind=$kind; }
done
echo "nemesis: $n faults survived in $duration s (seed $seed); every block at its newest acknowledged version after each, no I/O error"
for k in "${kinds[@]}"; do
	echo "nemesis: $k: ${count[$k]} faults, longest outage ${longest[$k]} ms"
done
echo "nemesis: longest outage $worst ms ($worst_kind)"
[ "$n" -ge 1 ] || fail "no fault in $duration s"
disconnect "$nqn"
stop_target2
stop_target
