# e2e-timeout: 300
# Three gateways, three gateway groups, configured once: `balance: true`
# spreads the groups over the gateways that are up, and `shared_config:
# true` keeps the subsystem in RADOS. Only A's file has the subsystem (it
# creates the shared object); B's and C's have none. The host connects to
# all three:
#   - one owner per group, each gateway owning one, and the host sees
#     exactly one optimized path per namespace, the owner's, and the rest
#     inaccessible;
#   - a namespace and a host added through B reach the host through A,
#     without a restart: the namespace appears on A's controller, and A's
#     discovery log lists the subsystem for the new host;
#   - C stops (SIGTERM): its group moves to A or B; C starts again: a group
#     comes back to it, one each again.
# From C's stop to its return, a look at the host's paths every 0.1 s
# finds at most one optimized path per namespace.
daemon_only "the gateway group is nvmeof-tgt's"
ceph_up
addr2_up
ADDR3=10.99.0.3
TARGET3_PID=""
WATCH_PID=""
trap 'cleanup; [ -z "$WATCH_PID" ] || kill "$WATCH_PID" 2>/dev/null; [ -z "$TARGET3_PID" ] || kill -9 "$TARGET3_PID" 2>/dev/null; ip addr del "$ADDR3/24" dev eth0 2>/dev/null || true' EXIT
ip addr add "$ADDR3/24" dev eth0 || fail "adding $ADDR3 to eth0"
wait_for 10 "an rxe GID for $ADDR3" rxe_has_gid "$ADDR3"
nqn=nqn.2026-11.io.example:gwbal
hostnqn=$(cat /etc/nvme/hostnqn)
other=nqn.2014-08.org.nvmexpress:uuid:0b5e6a3c-99b0-4c1d-8e2f-3a4b5c6d7e8f
for i in 1 2 3; do
	rbd_admin create --size 8M "$CEPH_POOL/gwbal-$i" >/dev/null 2>&1 || fail "rbd create gwbal-$i"
done

# gateway NAME CNTLID_MIN: the gateway block.
gateway() {
	cat <<YAML
ceph: {conf: $CEPH_CONF, user: $CEPH_USER, keyring: $CEPH_KEYRING}
gateway: {name: $1, pool: $CEPH_POOL, lease_prefix: e2e.gwbal, lease_seconds: 6, groups: [1, 2, 3],
  balance: true, rebalance_seconds: 1, failback_delay: 2, shared_config: true, cntlid_min: $2, cntlid_max: $(($2 + 99))}
YAML
}
config /tmp/a.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
$(gateway gw-a 1)
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $nqn
    serial: GWBAL0001
    hosts: [$hostnqn]
    namespaces:
      - {nsid: 1, backend: rbd, pool: $CEPH_POOL, image: gwbal-1, ana_group: 1, uuid: 0c1d2e3f-4a5b-4c6d-8e7f-101112131401}
      - {nsid: 2, backend: rbd, pool: $CEPH_POOL, image: gwbal-2, ana_group: 2, uuid: 0c1d2e3f-4a5b-4c6d-8e7f-101112131402}
      - {nsid: 3, backend: rbd, pool: $CEPH_POOL, image: gwbal-3, ana_group: 3, uuid: 0c1d2e3f-4a5b-4c6d-8e7f-101112131403}
CFG
config /tmp/b.yaml <<CFG
$(b_settings)
$(gateway gw-b 100)
ports: [{id: 2, address: $ADDR2, port: $PORT}]
CFG
sed -e 's/b\.sock/c.sock/; s/b-state/c-state/; s/:9751/:9752/; s/gw-b/gw-c/; s/cntlid_min: 100, cntlid_max: 199/cntlid_min: 200, cntlid_max: 299/' \
	-e "s/{id: 2, address: $ADDR2,/{id: 3, address: $ADDR3,/" /tmp/b.yaml >/tmp/c.yaml
grep -q "cntlid_min: 200" /tmp/c.yaml || fail "C's configuration has B's controller IDs"

# owners: each group's owners (the letters of the gateways that own it),
# as "1:a 2:b 3:c", from one read of each gateway's metrics.
owners() {
	local d st=() g
	for d in a b c; do
		st+=("$(gw_owned $d 1 2 3)")
	done
	local out=()
	for g in 1 2 3; do
		local o=""
		[[ ${st[0]} == *" $g "* ]] && o+=a
		[[ ${st[1]} == *" $g "* ]] && o+=b
		[[ ${st[2]} == *" $g "* ]] && o+=c
		out+=("$g:$o")
	done
	echo "${out[*]}"
}
# owner_of GROUP: its owners' letters.
owner_of() { local o; o=" $(owners)"; o=${o#* $1:}; echo "${o%% *}"; }
# one_each UP: every group has one owner, and each gateway in UP (letters)
# owns one.
one_each() {
	local o
	o=$(owners)
	[[ $o =~ ^1:([abc])\ 2:([abc])\ 3:([abc])$ ]] || return 1
	[ "$(printf '%s\n' "${BASH_REMATCH[@]:1}" | sort | tr -d '\n')" = "$1" ]
}
start_c() {
	log_end "$RESULTS/$SCENARIO-target3.log"
	C_FROM=$LOG_END
	"$NVMEOF_TGT" -config /tmp/c.yaml >>"$RESULTS/$SCENARIO-target3.log" 2>&1 &
	TARGET3_PID=$!
	wait_for 30 "daemon C answering discovery on $ADDR3" target_answers "$RESULTS/$SCENARIO-target3.log" "$ADDR3" "$TARGET3_PID" "$C_FROM"
}

# A first: it answers discovery only once it has created the shared
# object from its file (B and C, whose files have no subsystems, would
# create an empty one otherwise); then B and C together.
start_target /tmp/a.yaml
grep -q "shared configuration created from this daemon's file, version 1" "$RESULTS/$SCENARIO-target.log" ||
	fail "A did not create the shared configuration"
log_end "$RESULTS/$SCENARIO-target3.log"
C_FROM=$LOG_END
"$NVMEOF_TGT" -config /tmp/c.yaml >>"$RESULTS/$SCENARIO-target3.log" 2>&1 &
TARGET3_PID=$!
start_target2 /tmp/b.yaml
wait_for 30 "daemon C answering discovery on $ADDR3" target_answers "$RESULTS/$SCENARIO-target3.log" "$ADDR3" "$TARGET3_PID" "$C_FROM"
t0=$(now_ms)
wait_for 60 "one group owned by each gateway" one_each abc
echo "balanced: $(owners), $(($(now_ms) - t0)) ms after B and C were up"

ca=$(connect_at "$ADDR" "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=60)
cb=$(connect_at "$ADDR2" "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=60)
cc=$(connect_at "$ADDR3" "$nqn" --reconnect-delay=1 --ctrl-loss-tmo=60)
ctrl_of_letter() { case $1 in a) echo "$ca" ;; b) echo "$cb" ;; c) echo "$cc" ;; esac; }

# optimized NSID: the live controllers whose path to NSID is optimized.
optimized() {
	local c out=""
	for c in "$ca" "$cb" "$cc"; do
		[ "$(cat "/sys/class/nvme/$c/state" 2>/dev/null)" = live ] && ana_state_is "$c" "$1" optimized && out+="$c "
	done
	echo "$out"
}
# paths_follow_owners: for each group, the host's one optimized path is
# its owner's, the owner's other paths inaccessible.
paths_follow_owners() {
	local g o c all
	all=" $(owners)"
	for g in 1 2 3; do
		o=${all#* $g:}
		o=${o%% *}
		[ ${#o} = 1 ] || return 1
		[ "$(optimized $g)" = "$(ctrl_of_letter "$o") " ] || return 1
		for c in "$ca" "$cb" "$cc"; do
			[ "$c" = "$(ctrl_of_letter "$o")" ] && continue
			[ "$(cat "/sys/class/nvme/$c/state" 2>/dev/null)" = live ] || continue
			ana_state_is "$c" $g inaccessible || return 1
		done
	done
}
# watch_paths: from now on, look at the host's paths to the four
# namespaces every 0.1 s, in the background, and record every look that
# finds two optimized paths to one namespace (checked at the end). The
# paths' sysfs files are found once: a look reads them with builtins
# only, a few milliseconds even in the emulated guest.
watch_paths() {
	local nss=() states=() anas=() n c p i st a
	for n in 1 2 3 4; do
		for c in "$ca" "$cb" "$cc"; do
			p=$(path_of "$c" $n) || fail "no path of $c to namespace $n"
			nss+=("$n") states+=("/sys/class/nvme/$c/state") anas+=("/sys/class/nvme/$c/$p/ana_state")
		done
	done
	: >/tmp/gwbal-two-optimized
	: >/tmp/gwbal-looks
	local -A opt
	while :; do
		opt=()
		for i in "${!nss[@]}"; do
			read -r st <"${states[$i]}" 2>/dev/null || continue
			[ "$st" = live ] || continue
			read -r a <"${anas[$i]}" 2>/dev/null || continue
			[ "$a" = optimized ] && opt[${nss[$i]}]=$((${opt[${nss[$i]}]:-0} + 1))
		done
		for n in "${!opt[@]}"; do
			[ "${opt[$n]}" -le 1 ] || echo "$(now_ms) namespace $n: ${opt[$n]} optimized paths" >>/tmp/gwbal-two-optimized
		done
		echo -n . >>/tmp/gwbal-looks
		nap 0.1
	done
}
WATCH_PID=$!
wait_for 20 "the host's paths following the owners" paths_follow_owners
echo "the host: one optimized path per namespace, the owner's ($(owners))"

# Through B: a namespace and a host. A applies the group's new version.
discovered_for_other() { nvme discover -t rdma -a "$ADDR" -s "$PORT" --hostnqn="$other" 2>/dev/null | grep -q "subnqn: *$nqn\$"; }
discovered_for_other && fail "A lists the subsystem for $other before it was added"
ctl_b add namespace "$nqn" -nsid 4 -backend rbd -pool "$CEPH_POOL" -image gwbal-4 -create -size 8MiB \
	-uuid 0c1d2e3f-4a5b-4c6d-8e7f-101112131404 -ana-group 1 >/dev/null || fail "ctl add namespace 4 through B"
ctl_b add host "$nqn" "$other" >/dev/null || fail "ctl add host through B"
wait_for 20 "namespace 4 on the host's controller of A" path_of "$ca" 4 >/dev/null
wait_for 10 "A's discovery log listing the subsystem for $other" discovered_for_other
grep -q '"gateway shared configuration applied".*version=3\|gateway shared configuration applied.*version=3' "$RESULTS/$SCENARIO-target.log" ||
	fail "A's log has no apply of version 3: $(grep 'shared configuration' "$RESULTS/$SCENARIO-target.log" | tail -3)"
echo "a namespace and a host added through B reached the host through A"
wait_for 20 "namespace 4 on the host's controllers of B and C" eval 'path_of "$cb" 4 >/dev/null && path_of "$cc" 4 >/dev/null'
watch_paths &
WATCH_PID=$!

# C stops: its group moves to A or B.
c_group=""
for g in 1 2 3; do [ "$(owner_of $g)" = c ] && c_group=$g; done
[ -n "$c_group" ] || fail "C owns no group ($(owners))"
kill -TERM "$TARGET3_PID"
wait_for 10 "C exiting after SIGTERM" gone "$TARGET3_PID"
TARGET3_PID=""
ab_hold_all() { [[ $(owners) =~ ^1:[ab]\ 2:[ab]\ 3:[ab]$ ]] && [ -n "$(optimized "$c_group")" ]; }
wait_for 30 "A and B holding the three groups, the host seeing C's optimized elsewhere" ab_hold_all
echo "C stopped: its group $c_group moved ($(owners))"

# C returns: one group each again.
start_c
t0=$(now_ms)
wait_for 60 "one group owned by each gateway again" one_each abc
wait_for 30 "the host's path to C live again" ctrl_live_at "$nqn" "$ADDR3"
wait_for 20 "the host's paths following the owners" paths_follow_owners
echo "C back: $(owners) $(($(now_ms) - t0)) ms after its start"
kill "$WATCH_PID"
wait "$WATCH_PID" 2>/dev/null || true
WATCH_PID=""
looks=$(wc -c </tmp/gwbal-looks)
[ "$looks" -gt 100 ] || fail "only $looks looks at the host's paths"
[ ! -s /tmp/gwbal-two-optimized ] || fail "two optimized paths to a namespace: $(head -3 /tmp/gwbal-two-optimized)"
echo "$looks looks at the host's paths from C's stop to its return: never two optimized to a namespace"
fenced=0
for d in a b c; do
	sock=()
	[ "$d" = a ] || sock=(-socket "/run/nvmeof-tgt/$d.sock")
	fenced=$((fenced + $("$NVMEOF_TGT" ctl "${sock[@]}" list -json | jq '[.gateway.groups[].fencings] | add')))
done
assert_eq "fencings (every move a planned release)" "$fenced" 0
disconnect "$nqn"
kill -TERM "$TARGET3_PID"
wait_for 10 "C exiting after SIGTERM" gone "$TARGET3_PID"
TARGET3_PID=""
stop_target2
stop_target
