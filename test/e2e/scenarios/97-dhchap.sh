# e2e-timeout: 600
# In-band authentication (DH-HMAC-CHAP) with the Linux host: the right
# key connects and does I/O, a wrong key or none is refused, a host
# without a key still gets in where it is allowed to; bidirectional with
# the right controller key connects, and with a wrong one on the target
# the host refuses; every hash with a spread of DH groups; the host
# re-authenticates a live connection; a key rotated by reload applies to
# new connections and keeps the old one; a key added to a host connected
# without one ends that controller. Then the same keys and hosts
# against the Linux target in the same boot give the same outcomes.
#
# Needs a host kernel with NVMe authentication (CONFIG_NVME_HOST_AUTH):
# 6.12 (E2E_KERNEL=6.12), not Debian's 6.1, where it fails at once.
modprobe -q nvme-auth 2>/dev/null ||
	fail "host kernel $(uname -r) has no NVMe in-band authentication (CONFIG_NVME_HOST_AUTH): run this scenario with E2E_KERNEL=6.12"
grep -q dhchap_ctrl_secret /dev/nvme-fabrics 2>/dev/null || modprobe nvme-fabrics
grep -q dhchap_ctrl_secret /dev/nvme-fabrics ||
	fail "host kernel $(uname -r): nvme-fabrics takes no dhchap_ctrl_secret"

subsys=nqn.2026-11.io.example:auth
# Hosts: keyed (k), keyed and bidirectional (b), bidirectional with the
# wrong controller key on the target (w), and one without a key (n).
hk=nqn.2014-08.org.nvmexpress:uuid:97000000-0000-4000-8000-00000000000a
hb=nqn.2014-08.org.nvmexpress:uuid:97000000-0000-4000-8000-00000000000b
hw=nqn.2014-08.org.nvmexpress:uuid:97000000-0000-4000-8000-00000000000c
hn=nqn.2014-08.org.nvmexpress:uuid:97000000-0000-4000-8000-00000000000d
# gen KEY_NQN HMAC: a secret as nvme-cli makes them (HMAC 0: used as is,
# 1-3: transformed with SHA-256..512 first).
gen() { nvme gen-dhchap-key -n "$1" -m "$2" || fail "nvme gen-dhchap-key -n $1 -m $2"; }
kk=$(gen "$hk" 1)
kb=$(gen "$hb" 2)
cb=$(gen "$subsys" 3)
kw=$(gen "$hw" 0)
cw=$(gen "$subsys" 1)
cw_wrong=$(gen "$subsys" 1)
wrong=$(gen "$hk" 1)
keys=/tmp/dhchap-keys
rm -rf "$keys"
install -d -m 700 "$keys"
# put FILE KEY: a key file only its owner reads, as the daemon requires.
put() { (umask 077 && echo "$2" >"$keys/$1"); }
put hk.key "$kk"
put hb.key "$kb"
put cb.key "$cb"

# write_config [HASHES [DHGROUPS]]: the subsystem, restricted to those
# hashes and groups when given.
write_config() {
	config /tmp/tgt.yaml <<CFG
log: {format: json}
metrics: {address: 127.0.0.1:9750}
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $subsys
    hosts:
      - {nqn: $hk, dhchap_key_file: $keys/hk.key}
      - {nqn: $hb, dhchap_key_file: $keys/hb.key, dhchap_ctrl_key_file: $keys/cb.key}
      - {nqn: $hw, dhchap_key: "$kw", dhchap_ctrl_key: "$cw_wrong"}
      - $hn
${1:+    dhchap_hashes: [$1]}
${2:+    dhchap_dhgroups: [$2]}
    namespaces: [{nsid: 1, backend: file, path: /data/auth.img, size: 64MiB}]
CFG
}

# hconnect HOSTNQN [nvme-cli args]: connect as that host (its hostid is
# the NQN's UUID), one I/O queue to keep the exchanges few.
hconnect() {
	local h=$1
	shift
	nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$subsys" --hostnqn="$h" --hostid="${h##*:}" \
		--nr-io-queues=1 "$@"
}

# fconnect HOSTNQN [OPTION=VALUE...]: connect as that host beside a live
# controller of the same subsystem, through /dev/nvme-fabrics as nvme-cli
# does: nvme-cli 2.3 takes any controller of the subsystem at that address
# for this one and says "already connected", -D or not.
fconnect() {
	local h=$1 o
	shift
	o="transport=rdma,traddr=$ADDR,trsvcid=$PORT,nqn=$subsys,hostnqn=$h,hostid=${h##*:},nr_io_queues=1,duplicate_connect"
	for x in "$@"; do o+=",$x"; done
	echo "$o" >/dev/nvme-fabrics
}

# try CASE HOSTNQN [nvme-cli args]: print "CASE connects" or "CASE
# refused", leaving nothing connected either way.
try() {
	local name=$1
	shift
	if hconnect "$@" >/dev/null 2>&1; then
		echo "$name connects"
		nvme disconnect -n "$subsys" >/dev/null || fail "disconnecting after $name"
	else
		echo "$name refused"
	fi
	wait_for 10 "the host dropping its controllers of $subsys after $name" no_host_ctrl
}

# no_host_ctrl: the host has no controller of the subsystem.
no_host_ctrl() { ! ctrl_at "$subsys" "$ADDR" >/dev/null; }

# host_ctrl HOSTNQN [EXCEPT]: the host's controller (nvmeN) of the
# subsystem connected as HOSTNQN, other than EXCEPT.
host_ctrl() {
	local x
	for x in /sys/class/nvme/nvme*; do
		[ "$(cat "$x/subsysnqn" 2>/dev/null)" = "$subsys" ] && [ "$(cat "$x/hostnqn")" = "$1" ] || continue
		[ "$(basename "$x")" != "${2:-}" ] || continue
		basename "$x"
		return 0
	done
	return 1
}

# authed HOSTNQN MATCH WHAT [OPTION=VALUE...]: connects as that host beside
# the live connection, disconnects again, and prints how many queues the
# daemon logged as authenticated, matching MATCH, meanwhile.
authed() {
	local h=$1 match=$2 what=$3 before c
	shift 3
	before=$(authlog "host authenticated" "$match")
	fconnect "$h" "$@" || fail "connect $what"
	c=$(host_ctrl "$h" "${live:-}") || fail "no controller after connecting $what"
	nvme disconnect -d "$c" >/dev/null || fail "disconnect $c"
	echo $(($(authlog "host authenticated" "$match") - before))
}

# outcomes: the cases both targets must decide alike.
outcomes() {
	try right_key "$hk" --dhchap-secret="$kk"
	try wrong_key "$hk" --dhchap-secret="$wrong"
	try no_key "$hk"
	try unkeyed_host "$hn"
	try unkeyed_host_with_secret "$hn" --dhchap-secret="$(gen "$hn" 1)"
	try bidirectional "$hb" --dhchap-secret="$kb" --dhchap-ctrl-secret="$cb"
	try host_key_only "$hb" --dhchap-secret="$kb"
	try ctrl_key_not_on_target "$hk" --dhchap-secret="$kk" --dhchap-ctrl-secret="$cb"
	try wrong_ctrl_key "$hw" --dhchap-secret="$kw" --dhchap-ctrl-secret="$cw"
}
expected="right_key connects
wrong_key refused
no_key refused
unkeyed_host connects
unkeyed_host_with_secret connects
bidirectional connects
host_key_only connects
ctrl_key_not_on_target refused
wrong_ctrl_key refused"

# authlog MSG [JQ-FILTER]: how many of the daemon's log entries say MSG
# (and match the filter).
authlog() {
	jq -nR --arg m "$1" "[inputs | fromjson? | select(.msg == \$m) | select(${2:-true})] | length" "$RESULTS/$SCENARIO-target.log"
}
# ctrls_of HOSTNQN: the daemon's controllers for that host.
ctrls_of() { "$NVMEOF_TGT" ctl list -json | jq --arg h "$1" '[.subsystems[].controllers[] | select(.host == $h)] | length'; }
no_target_ctrl() { [ "$(ctrls_of "$1")" = 0 ]; }
# failures HOSTNQN REASON: the daemon's count of failed authentications.
failures() {
	local v
	v=$(metric nvmeof_tgt_authentication_failures_total "host=\"$1\",reason=\"$2\"")
	echo "${v:-0}"
}

write_config
start_target /tmp/tgt.yaml

# --- the cases one by one, with what the daemon saw ---
got=$(outcomes)
echo "$got"
assert_eq "outcomes against $TARGET" "$got" "$expected"
if ours; then
	assert_eq "wrong key counted" "$(failures "$hk" wrong_response)" 1
	assert_eq "bidirectional without a controller key counted" "$(failures "$hk" no_controller_key)" 1
	assert_eq "wrong controller key: the host's refusal counted" "$(failures "$hw" host_refused_controller)" 1
	for h in "$hk" "$hw"; do
		wait_for 10 "no controller left for refused host $h" no_target_ctrl "$h"
	done
	assert_eq "bidirectional authentications (admin and I/O queue)" \
		"$(authlog "host authenticated" ".host == \"$hb\" and .bidirectional")" 2
	if grep -qF -e "$kk" -e "${kk:10:20}" -e "$wrong" -e "${kb:10:20}" -e "${cb:10:20}" "$RESULTS/$SCENARIO-target.log"; then
		fail "a secret appears in the daemon's log"
	fi
fi

# --- the right key does I/O ---
dev=$(connect "$subsys" --hostnqn="$hk" --hostid="${hk##*:}" --nr-io-queues=1 --dhchap-secret="$kk")
fio_ok verify --filename="$dev" --rw=randwrite --bs=4k --iodepth=8 --ioengine=libaio --direct=1 \
	--size=8m --verify=crc32c
live=$(ctrl_of "$subsys")

# --- every hash and every group, each at least once (daemon only: the
# Linux target picks per host, below, where ffdhe8192 comes with SHA-384) ---
if ours; then
	for combo in sha256/null sha256/ffdhe2048 sha384/ffdhe3072 sha512/ffdhe4096 sha512/ffdhe6144; do
		hash=${combo%/*} group=${combo#*/}
		write_config "$hash" "$group"
		"$NVMEOF_TGT" ctl reload >/dev/null || fail "ctl reload for $combo"
		match=".host == \"$hb\" and .hash == \"$hash\" and .dhgroup == \"$group\" and .bidirectional"
		start=$(now_ms)
		n=$(authed "$hb" "$match" "bidirectionally with $combo" "dhchap_secret=$kb" "dhchap_ctrl_secret=$cb")
		ms=$(($(now_ms) - start))
		assert_eq "queues authenticated with $hash and $group (connect and disconnect took $((ms / 1000)).$((ms % 1000 / 100)) s)" "$n" 2
	done
	write_config
	"$NVMEOF_TGT" ctl reload >/dev/null || fail "ctl reload back to every hash and group"
	assert_eq "the first connection through the reloads" "$(cat "/sys/class/nvme/$live/state")" live

	# A host's own lists narrow the subsystem's: this host only, pinned
	# to SHA-384 and ffdhe8192 through the admin socket.
	"$NVMEOF_TGT" ctl set host "$subsys" "$hb" -dhchap-key-file "$keys/hb.key" -dhchap-ctrl-key-file "$keys/cb.key" \
		-dhchap-hashes sha384 -dhchap-dhgroups ffdhe8192 || fail "ctl set host with its own hash and group"
	assert_eq "queues authenticated with the host's own hash and group" \
		"$(authed "$hb" ".host == \"$hb\" and .hash == \"sha384\" and .dhgroup == \"ffdhe8192\"" \
			"with the host's own lists" "dhchap_secret=$kb" "dhchap_ctrl_secret=$cb")" 2
	assert_eq "the other host keeps the subsystem's choice" \
		"$(authed "$hk" ".host == \"$hk\" and .dhgroup == \"ffdhe8192\"" "as another host" "dhchap_secret=$kk")" 0
	write_config
	"$NVMEOF_TGT" ctl reload >/dev/null || fail "ctl reload back to the file's hosts"
fi

# --- key rotation: a new key file and a reload keep the connection; new
# connections need the new key ---
new=$(gen "$hk" 2)
if ours; then
	put hk.key "$new"
	"$NVMEOF_TGT" ctl reload >/dev/null || fail "ctl reload with the rotated key"
else
	kt_host_auth "$hk" "$new" || fail "setting the rotated key on the Linux target"
fi
assert_eq "the connection after the rotation" "$(cat "/sys/class/nvme/$live/state")" live
fio_ok after-rotation --filename="$dev" --rw=read --bs=64k --iodepth=4 --ioengine=libaio --direct=1 --size=4m
# A second controller of the same host, beside the live one.
if fconnect "$hk" "dhchap_secret=$kk" 2>/dev/null; then
	fail "the old key still connects after the rotation"
fi
fconnect "$hk" "dhchap_secret=$new" || fail "connect with the rotated key"
c=$(host_ctrl "$hk" "$live") || fail "no second controller after connecting with the rotated key"
nvme disconnect -d "$c" >/dev/null || fail "disconnect $c"

# --- re-authentication of the live connection, started by the host with
# the new secret ---
before=0
if ours; then before=$(authlog "host re-authenticated" ".host == \"$hk\""); fi
dmesg -C
echo "$new" >"/sys/class/nvme/$live/dhchap_secret" || fail "writing $live's dhchap_secret"
# The host logs each admin queue authentication, re-authentications too.
dmesg_has() { dmesg | grep -qF "$1"; }
wait_for 30 "the host re-authenticating $live" dmesg_has "$live: qid 0: authenticated with hash"
if ours; then
	reauthed() { [ "$(authlog "host re-authenticated" ".host == \"$hk\"")" -ge $((before + 2)) ]; }
	wait_for 30 "the admin and I/O queue re-authenticating" reauthed
fi
if dmesg | grep -q "authentication failed"; then
	fail "re-authentication failed: $(dmesg | grep "authentication failed")"
fi
assert_eq "the connection after re-authenticating" "$(cat "/sys/class/nvme/$live/state")" live
fio_ok after-reauth --filename="$dev" --rw=randwrite --bs=4k --iodepth=8 --ioengine=libaio --direct=1 \
	--size=4m --verify=crc32c

# --- a key added live to a host connected without one (its NQN may have
# been spoofed): the controller that never authenticated ends, given
# through standard input as an administrator would ---
if ours; then
	fconnect "$hn" || fail "connect the host without a key"
	c=$(host_ctrl "$hn" "$live") || fail "no controller for the host without a key"
	assert_eq "the keyless host's controllers on the target" "$(ctrls_of "$hn")" 1
	put hn.key "$(gen "$hn" 1)"
	"$NVMEOF_TGT" ctl set host "$subsys" "$hn" -dhchap-key - <"$keys/hn.key" ||
		fail "ctl set host -dhchap-key - for the connected host"
	wait_for 10 "the target ending the controller that never authenticated" no_target_ctrl "$hn"
	# The host tries to reconnect without the key, and is refused.
	assert_eq "the keyless host's controllers after its key was added" "$(ctrls_of "$hn")" 0
	nvme disconnect -d "$c" >/dev/null 2>&1 || true
	c_gone() { ! host_ctrl "$hn" "$live" >/dev/null; }
	wait_for 30 "the host dropping $c" c_gone
	assert_eq "the keyed host's connection through it all" "$(cat "/sys/class/nvme/$live/state")" live
	write_config
	"$NVMEOF_TGT" ctl reload >/dev/null || fail "ctl reload back to the file's hosts"
fi
disconnect "$subsys"
stop_target

# --- the Linux target, same boot, same keys and hosts ---
if ours; then
	source "$E2E_DIR/../vm/kernel-target.sh"
	put hk.key "$kk"
	write_config
	kt_load >>"$RESULTS/$SCENARIO-kernel.log" 2>&1 || fail "loading the Linux target"
	KERNEL_TARGET_UP=1
	kt_from_config /tmp/tgt.yaml >>"$RESULTS/$SCENARIO-kernel.log" 2>&1 ||
		fail "configuring the Linux target: $(tail -5 "$RESULTS/$SCENARIO-kernel.log")"
	kt_answers() { nvme discover -t rdma -a "$ADDR" -s "$PORT" >/dev/null 2>&1; }
	wait_for 30 "the Linux target answering discovery" kt_answers
	# nvmet starts tearing its controller down before it sends AUTH_Failure1
	# or completes the host's AUTH_Failure2 (fabrics-cmd-auth.c), and now and
	# then the teardown wins: the response never leaves. The host, still
	# connecting, waits out its admin timeout (60 s) and resends on the
	# dead queue, up to five times, so a refused connect blocks for
	# minutes. A 15 s timeout without resends turns that into a refusal
	# in 15 s, the outcome nvmet meant; a connect that should succeed
	# still has to.
	params=/sys/module/nvme_core/parameters
	host_timeouts="$(cat $params/admin_timeout) $(cat $params/max_retries)"
	kt_dmesg=$(dmesg | wc -l) kt_start=$SECONDS
	echo 15 >$params/admin_timeout && echo 0 >$params/max_retries ||
		fail "setting the host's admin timeout and retries for the Linux target"
	got=$(outcomes)
	echo "$got"
	assert_eq "outcomes against the Linux target" "$got" "$expected"
	# Its hash and group are per host: a couple of the table's.
	for combo in sha512/ffdhe2048 sha384/null; do
		kt_host_auth "$hb" "$kb" "$cb" "${combo%/*}" "${combo#*/}" || fail "Linux target: $combo"
		try "bidirectional_$combo" "$hb" --dhchap-secret="$kb" --dhchap-ctrl-secret="$cb" |
			grep -qx "bidirectional_$combo connects" || fail "Linux target: $combo refused"
	done
	KERNEL_TARGET_UP=""
	kt_clear || fail "tearing the Linux target down"
	read -r kt_timeout kt_retries <<<"$host_timeouts"
	echo "$kt_timeout" >$params/admin_timeout && echo "$kt_retries" >$params/max_retries ||
		fail "restoring the host's admin timeout and retries"
	lost=$(dmesg | tail -n +"$((kt_dmesg + 1))" | grep -c "(Fabrics Cmd) QID 0 timeout" || true)
	echo "Linux target: the cases took $((SECONDS - kt_start)) s; authentication responses the host waited out: $lost"
fi
