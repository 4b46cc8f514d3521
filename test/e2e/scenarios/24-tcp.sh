# e2e-timeout: 480
# NVMe/TCP, no RDMA on the host's side: the Linux host's nvme-tcp against
# our TCP ports. Discovery over TCP on 8009 (a referral to 4420) and on
# 4420 (the subsystem's record: trtype tcp, sectype none); a connect with
# header and data digests and SQ flow control disabled (reads then end
# with the SUCCESS flag on their C2HData, no CapsuleResp) and a fio write
# and verify pass on a file namespace and on a block one (/dev/vdb)
# through it. Then the same subsystem also over the RDMA port: native
# multipath makes one namespace of the two paths, and I/O with the
# round-robin policy goes through both.
# Then ANA over two TCP ports: the block namespace's group optimized on
# 4420 and non-optimized on 4421, the host holds both paths' states, and
# `ctl set ana` under fio moves the I/O to 4421 without an error. Last,
# DH-HMAC-CHAP over TCP: bidirectional with the right keys connects and
# does I/O, a wrong host key is refused, and so is a wrong controller key
# (by the host). The 6.1 host has no NVMe authentication: there that part
# is skipped, saying so.
daemon_only "NVMe/TCP ports of nvmeof-tgt"
modprobe nvme-tcp || fail "modprobe nvme-tcp"
nqn=nqn.2026-11.io.example:tcp
auth=nqn.2026-11.io.example:tcpauth
[ -b /dev/vdb ] || fail "no second virtio disk for the block namespace"
# Hosts of the authenticated subsystem: bidirectional (hb), and one whose
# controller key on the target is not the one it expects (hw).
hb=nqn.2014-08.org.nvmexpress:uuid:24000000-0000-4000-8000-00000000000b
hw=nqn.2014-08.org.nvmexpress:uuid:24000000-0000-4000-8000-00000000000c
gen() { nvme gen-dhchap-key -n "$1" -m "$2" || fail "nvme gen-dhchap-key -n $1 -m $2"; }
kb=$(gen "$hb" 1) cb=$(gen "$auth" 2) kw=$(gen "$hw" 1) cw=$(gen "$auth" 1) cw_target=$(gen "$auth" 1)
kb_wrong=$(gen "$hb" 1)
config /tmp/tgt.yaml <<CFG
log: {format: json}
metrics: {address: 127.0.0.1:9750}
ports:
  - {id: 1, address: $ADDR, port: $PORT, ana: {1: optimized}}
  - {id: 2, transport: tcp, address: $ADDR, port: 4420, ana: {1: optimized, 2: optimized}}
  - id: 3
    transport: tcp
    address: $ADDR
    port: 8009
    referrals: [{transport: tcp, address: $ADDR, port: 4420}]
  - {id: 4, transport: tcp, address: $ADDR, port: 4421, ana: {2: non_optimized}}
subsystems:
  - nqn: $nqn
    allow_any_host: true
    ports: [1, 2, 4]
    namespaces:
      - {nsid: 1, backend: file, path: /data/tcp.img, size: 128MiB}
      - {nsid: 2, backend: block, path: /dev/vdb, ana_group: 2}
  - nqn: $auth
    ports: [2]
    hosts:
      - {nqn: $hb, dhchap_key: "$kb", dhchap_ctrl_key: "$cb"}
      - {nqn: $hw, dhchap_key: "$kw", dhchap_ctrl_key: "$cw_target"}
    namespaces: [{nsid: 1, backend: file, path: /data/tcpauth.img, size: 16MiB}]
CFG
start_target /tmp/tgt.yaml

nvme discover -t tcp -a "$ADDR" -s 8009 >"$RESULTS/$SCENARIO-disc8009.txt" || fail "nvme discover over TCP on 8009"
grep -A8 "subtype: .*referral" "$RESULTS/$SCENARIO-disc8009.txt" | grep -q "trsvcid: *4420" ||
	fail "no referral to 4420 in port 8009's discovery log: $(cat "$RESULTS/$SCENARIO-disc8009.txt")"
echo "ok: port 8009 refers hosts to 4420"
nvme discover -t tcp -a "$ADDR" -s 4420 >"$RESULTS/$SCENARIO-disc4420.txt" || fail "nvme discover over TCP on 4420"
rec=$(grep -B7 -A4 "subnqn: *$nqn" "$RESULTS/$SCENARIO-disc4420.txt")
grep -q "trtype: *tcp" <<<"$rec" || fail "the subsystem's record is not trtype tcp: $rec"
grep -q "sectype: *none" <<<"$rec" || fail "the subsystem's record has a security type: $rec"
echo "ok: discovery over TCP lists $nqn as trtype tcp, sectype none"

nvme connect -t tcp -a "$ADDR" -s 4420 -n "$nqn" --hdr-digest --data-digest --disable-sqflow >&2 ||
	fail "nvme connect over TCP with digests and SQ flow control disabled"
dev=$(wait_dev "$nqn")
dev2=$(wait_dev "$nqn" 2)
ct=$(ctrl_of "$nqn")
assert_eq "the controller's transport" "$(cat "/sys/class/nvme/$ct/transport")" tcp
# Host and target share the guest's kernel: the host's zero-copy sends of
# fio's buffers reach our read(2) as socket fragments in those pages, and
# hardened usercopy refuses a copy that crosses from one transparent huge
# page into the next (a kernel BUG in the target's thread). Off for this
# scenario; the nvmet-tcp target reads in the kernel and is not checked.
thp=/sys/kernel/mm/transparent_hugepage/enabled
thp_was=$(sed 's/.*\[\(.*\)\].*/\1/' "$thp")
echo never >"$thp"
# One job writes 4 MiB on each namespace, the file one and the block one,
# then reads back and verifies what it wrote (one fio: each start takes
# seconds in the guest).
f0=$(path_ios "$ct" 1) b0=$(path_ios "$ct" 2)
fio_ok write-verify --rw=randwrite --do_verify=1 --filename="$dev:$dev2" --ioengine=libaio --direct=1 \
	--iodepth=16 --bsrange=4k-1m --size=8m --verify=crc32c --verify_state_save=0 --randrepeat=1 --randseed=24
[ "$FIO_WRITTEN" -ge $((8 << 20)) ] || fail "fio wrote only $FIO_WRITTEN bytes"
[ "$FIO_READ" -ge $((8 << 20)) ] || fail "the verify pass read only $FIO_READ bytes"
path_ios_above "$ct" 1 $((f0 + 4)) || fail "fio's I/O missed the file namespace: $(($(path_ios "$ct" 1) - f0))"
path_ios_above "$ct" 2 $((b0 + 4)) || fail "fio's I/O missed the block namespace: $(($(path_ios "$ct" 2) - b0))"
echo "ok: $(($(path_ios "$ct" 1) - f0)) I/Os on the file namespace, $(($(path_ios "$ct" 2) - b0)) on the block one"
# The block namespace's blocks are /dev/vdb's.
cmp <(dd if="$dev2" bs=1M count=4 iflag=direct status=none) <(dd if=/dev/vdb bs=1M count=4 iflag=direct status=none) ||
	fail "what the host reads of namespace 2 differs from /dev/vdb"
echo "ok: namespace 2 over TCP reads what /dev/vdb holds"
# blkdiscard: the host sends its one range in a whole page of in-capsule
# data, a descriptor longer than the range.
dd if=/dev/urandom of="$dev" bs=1M count=1 oflag=direct status=none
blkdiscard -o 0 -l $((1 << 20)) "$dev" || fail "blkdiscard over TCP"
cmp -n $((1 << 20)) <(dd if="$dev" bs=1M count=1 iflag=direct status=none) /dev/zero || fail "the range discarded over TCP is not zero"
echo "ok: blkdiscard over TCP reads back zeros"
assert_eq "TCP connections of port 2 (admin and I/O queues)" "$(metric nvmeof_tgt_tcp_connections 'port="2"')" "$(($(nproc) + 1))"
assert_eq "data digest errors" "$(metric nvmeof_tgt_tcp_data_digest_errors_total 'port="2"')" 0
assert_eq "C2HTermReqs" "$(metric nvmeof_tgt_tcp_term_requests_total 'port="2"')" 0
assert_eq "TCP queues connected with SQ flow control disabled" \
	"$(jq -R 'fromjson? | select(.msg == "queue connected" and .sq_flow_control == "disabled")' \
		"$RESULTS/$SCENARIO-target.log" | jq -s length)" "$(($(nproc) + 1))"

# The RDMA path beside it: one namespace, two paths.
connect_at "$ADDR" "$nqn" >/dev/null
# connect_at finds a controller by address, which both paths share.
cr=""
for c in /sys/class/nvme/nvme*; do
	[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$nqn" ] || continue
	[ "$(cat "$c/transport")" = rdma ] || continue
	cr=$(basename "$c")
done
assert_eq "the second controller's transport" "$(cat "/sys/class/nvme/$cr/transport")" rdma
assert_eq "namespaces the host made of two paths" "$(ns_heads "$nqn")" 2
subsys=""
for s in /sys/class/nvme-subsystem/nvme-subsys*; do
	[ "$(cat "$s/subsysnqn")" = "$nqn" ] || continue
	subsys=$s
done
echo round-robin >"$subsys/iopolicy" || fail "setting the round-robin I/O policy"
t0=$(path_ios "$ct" 1) r0=$(path_ios "$cr" 1)
fio_ok both --rw=randread --ioengine=libaio --direct=1 --iodepth=8 --bs=4k --size=4m --filename="$dev"
path_ios_above "$ct" 1 $((t0 + 100)) || fail "no I/O through the TCP path: $(($(path_ios "$ct" 1) - t0))"
path_ios_above "$cr" 1 $((r0 + 100)) || fail "no I/O through the RDMA path: $(($(path_ios "$cr" 1) - r0))"
echo "ok: $(($(path_ios "$ct" 1) - t0)) I/Os over TCP, $(($(path_ios "$cr" 1) - r0)) over RDMA"
nvme disconnect -d "$cr" >&2 || fail "disconnecting the RDMA path $cr"

# ANA over two TCP ports: namespace 2's group 2 is optimized on port 2
# (4420) and non-optimized on port 4 (4421).
# tcp_ctrl SVC: the host's live TCP controller of the subsystem on TCP port SVC.
tcp_ctrl() {
	local c
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$nqn" ] && [ "$(cat "$c/transport")" = tcp ] || continue
		[[ $(cat "$c/address"), == *"trsvcid=$1,"* ]] && [ "$(cat "$c/state")" = live ] || continue
		basename "$c"
		return 0
	done
	return 1
}
nvme connect -t tcp -a "$ADDR" -s 4421 -n "$nqn" >&2 || fail "nvme connect over TCP on 4421"
c4=$(poll 10 tcp_ctrl 4421) || fail "no live controller on 4421 within 10 s"
assert_eq "namespaces the host made of two TCP paths" "$(ns_heads "$nqn")" 2
wait_for 10 "the host holding 4420's path to namespace 2" ana_state_is "$ct" 2 optimized
wait_for 10 "the host holding 4421's path to namespace 2" ana_state_is "$c4" 2 non-optimized
assert_eq "namespace 1 through 4421 (group 1)" "$(ana_state "$c4" 1)" optimized
echo "ok: namespace 2 is optimized through $ct (4420), non-optimized through $c4 (4421)"
# The versioned-block writer (test/e2e/vblock) rewrites 256 blocks of
# namespace 2 until stopped; the change comes once 64 of its writes went
# through 4420, and it stops once 64 more went through 4421.
[ -x "${VBLOCK:-}" ] || fail "VBLOCK (the test/e2e/vblock tool) is not set by the harness"
a0=$(path_ios "$ct" 2) n0=$(path_ios "$c4" 2)
"$VBLOCK" write -dev "$dev2" -ledger "$VB_LEDGER" -blocks 256 -writers 8 >>"$VB_LOG" 2>&1 &
vb_pid=$!
# writing_through CTRL N: CTRL's path to namespace 2 did more than N I/Os
# while the writer runs.
writing_through() {
	gone "$vb_pid" && fail "the writer ended: $(tail -5 "$VB_LOG")"
	path_ios_above "$1" 2 "$2"
}
wait_for 60 "64 writes through 4420" writing_through "$ct" $((a0 + 64))
assert_eq "I/Os through 4421, the non-optimized path, before the change" $(($(path_ios "$c4" 2) - n0)) 0
# Both at once: each ctl takes seconds to start in the guest.
"$NVMEOF_TGT" ctl set ana 4 2 optimized &
set_4=$!
"$NVMEOF_TGT" ctl set ana 2 2 inaccessible || fail "ctl set ana 2 2 inaccessible"
wait "$set_4" || fail "ctl set ana 4 2 optimized"
wait_for 15 "the host seeing 4420's path inaccessible" ana_state_is "$ct" 2 inaccessible
wait_for 15 "the host seeing 4421's path optimized" ana_state_is "$c4" 2 optimized
wait_for 10 "4420's path to namespace 2 drained" eval '[ "$(path_inflight "$ct" 2)" = 0 ]'
a1=$(path_ios "$ct" 2) b1=$(path_ios "$c4" 2)
wait_for 60 "64 writes through 4421" writing_through "$c4" $((b1 + 64))
vblock_stop
assert_eq "I/Os through 4420 after it became inaccessible" "$(($(path_ios "$ct" 2) - a1))" 0
echo "ok: $(($(path_ios "$c4" 2) - b1)) writes through 4421 after the change"
# Every block, written through either path, reads back its newest version
# through 4421.
"$VBLOCK" verify -dev "$dev2" -ledger "$VB_LEDGER" >>"$VB_LOG" 2>&1 ||
	fail "blocks without their newest version after the ANA change: $(tail -5 "$VB_LOG")"
assert_eq "I/Os through 4420 during the verify" "$(($(path_ios "$ct" 2) - a1))" 0
echo "$(grep 'vblock: verified' "$VB_LOG" | tail -1)"
assert_eq "namespace 1 through 4420 (group 1 unchanged)" "$(ana_state "$ct" 1)" optimized
disconnect "$nqn"

# DH-HMAC-CHAP over TCP, as the RDMA scenario 97-dhchap does, on the
# authenticated subsystem (one I/O queue, to keep the exchanges few).
host_auth() { modprobe -q nvme-auth 2>/dev/null && grep -q dhchap_ctrl_secret /dev/nvme-fabrics; }
if ! host_auth; then
	# Debian's 6.1 is built without it; any other kernel this suite boots
	# has it, and missing it there is a failure, not a skip.
	[[ $(uname -r) == 6.1.* ]] || fail "host kernel $(uname -r) has no NVMe in-band authentication (CONFIG_NVME_HOST_AUTH)"
	echo "skipped: DH-HMAC-CHAP over TCP, host kernel $(uname -r) has no NVMe authentication (run on E2E_KERNEL=6.12)"
else
	aconnect() { # HOSTNQN [nvme-cli args]
		local h=$1
		shift
		nvme connect -t tcp -a "$ADDR" -s 4420 -n "$auth" --hostnqn="$h" --hostid="${h##*:}" --nr-io-queues=1 "$@"
	}
	failures() {
		local v
		v=$(metric nvmeof_tgt_authentication_failures_total "host=\"$1\",reason=\"$2\"")
		echo "${v:-0}"
	}
	aconnect "$hb" --dhchap-secret="$kb" --dhchap-ctrl-secret="$cb" >&2 || fail "bidirectional connect over TCP"
	adev=$(wait_dev "$auth")
	head -c $((1 << 20)) /dev/urandom >/tmp/auth.bin
	dd if=/tmp/auth.bin of="$adev" bs=64k oflag=direct status=none || fail "writing through the authenticated controller"
	assert_eq "1 MiB read back through the authenticated controller" \
		"$(dd if="$adev" bs=64k count=16 iflag=direct status=none | sha256sum)" "$(sha256sum </tmp/auth.bin)"
	n=$(jq -R --arg h "$hb" 'fromjson? | select(.msg == "host authenticated" and .host == $h and .bidirectional)' \
		"$RESULTS/$SCENARIO-target.log" | jq -s length)
	assert_eq "queues authenticated bidirectionally over TCP (admin and I/O)" "$n" 2
	disconnect "$auth"
	if aconnect "$hb" --dhchap-secret="$kb_wrong" >/dev/null 2>&1; then
		fail "a wrong host key connected over TCP"
	fi
	assert_eq "the wrong host key counted" "$(failures "$hb" wrong_response)" 1
	if aconnect "$hw" --dhchap-secret="$kw" --dhchap-ctrl-secret="$cw" >/dev/null 2>&1; then
		fail "the host accepted a controller key it did not expect over TCP"
	fi
	assert_eq "the wrong controller key: the host's refusal counted" "$(failures "$hw" host_refused_controller)" 1
	no_auth_ctrl() { ! ctrl_of "$auth" >/dev/null; }
	wait_for 10 "the host dropping the refused controllers" no_auth_ctrl
	echo "ok: DH-HMAC-CHAP over TCP: bidirectional connects, a wrong host key and a wrong controller key are refused"
fi
echo "$thp_was" >"$thp"
stop_target
