# e2e-timeout: 300
# TLS 1.3 on NVMe/TCP (the secure channel), with the Linux host's own
# handshake daemon, tlshd (Debian 13's, unpacked by test/install-deps.sh),
# and the PSK in the kernel's .nvme key ring as libnvme would put it there:
# under the identity NVMe0R01 <host> <subsystem>, the TLS PSK that libnvme
# 1.16.2 derives from the configured key (package tlspsk's known answers:
# this host, subsystem and key are those of its libnvmeKATs). Our target
# derives it from the same configured key (tls_key).
#   - discovery through a port that allows TLS gives TSAS TLS 1.3, TREQ not
#     required;
#   - the host connects with tls to a port that requires it: fio write and
#     verify, and kernel TLS carries both ends (/proc/net/tls_stat);
#   - a connect in clear to that port is refused, and counted;
#   - with a wrong key in the host's key ring the handshake fails, and is
#     counted;
#   - a version 1 identity (NVMe1R01 ... <digest>), which the host tries
#     first, connects, its digest checked by the target;
#   - the Linux target (nvmet-tcp, tlshd on its side too) with TLS required,
#     in the same boot, as the reference;
#   - package ktls's tests of kernel TLS (TestKernelTLS, TestServer), which
#     a machine without the tls module skips, run and pass (KTLS_TEST).
daemon_only "TLS on nvmeof-tgt's NVMe/TCP ports"
tlshd=${NVMEOF_TEST_CACHE:-/var/cache/nvmeof-tgt-test}/tlshd/usr/sbin/tlshd
[ -x "$tlshd" ] || fail "no tlshd at $tlshd: run test/install-deps.sh"
for m in nvme-tcp tls nvme-keyring; do modprobe "$m" || fail "modprobe $m"; done
host=nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6
sub=nqn.2024-06.io.example:tank.vol7
key=NVMeTLSkey-1:01:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:
psk=aba76ec8224025d55200ee10a82fc77250f3dabec272b8c36b676c453c50117f # libnvme 1.16.2's
wrong=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff
printf '[debug]\nloglevel=2\ntls=0\nnl=0\n[authenticate]\nkeyrings=.nvme\n' >/tmp/tlshd.conf
"$tlshd" -c /tmp/tlshd.conf -s >>"$RESULTS/$SCENARIO-tlshd.log" 2>&1 &
tlshd_pid=$!
trap 'cleanup; kill "$tlshd_pid" 2>/dev/null || true' EXIT
ring=$(awk '$9 == ".nvme:" { print $1 }' /proc/keys)
[ -n "$ring" ] || fail "no .nvme key ring in /proc/keys"
# put_psk HEX: the host's PSK for the identity, replaced if there.
put_psk() {
	printf '%s' "$1" | xxd -r -p | keyctl padd psk "NVMe0R01 $host $sub" "$((16#$ring))" >/dev/null ||
		fail "keyctl padd psk into .nvme"
}
put_psk "$psk"
tls_sw() { awk '$1 == "TlsCurrTxSw" || $1 == "TlsCurrRxSw" { n += $2 } END { print n + 0 }' /proc/net/tls_stat; }
tls_tx_total() { awk '$1 == "TlsTxSw" { print $2 }' /proc/net/tls_stat; }
# tls_counted RESULT: port 2 counted a handshake with RESULT.
tls_counted() { [ "$(metric nvmeof_tgt_tcp_tls_handshakes_total "port=\"2\",result=\"$1\"")" -ge 1 ] 2>/dev/null; }
connect_tls() { # PORT [tls]: the controller's name, or fails
	fabrics_connect "transport=tcp,traddr=$ADDR,trsvcid=$1,nqn=$sub,hostnqn=$host,hostid=${host##*uuid:}${2:+,$2},ctrl_loss_tmo=0"
}
config /tmp/tgt.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
ports:
  - {id: 1, address: $ADDR, port: $PORT}
  - {id: 2, transport: tcp, address: $ADDR, port: 4420, tls: required}
  - {id: 3, transport: tcp, address: $ADDR, port: 4421, tls: allowed}
subsystems:
  - nqn: $sub
    ports: [2, 3]
    hosts: [{nqn: $host, tls_key: "$key"}]
    namespaces: [{nsid: 1, backend: file, path: /data/tls.img, size: 64MiB}]
CFG
start_target /tmp/tgt.yaml

# The raw log page, not nvme-cli's words: its table of TREQ strings
# (libnvme 1.3) names no combination with SQ flow control disable.
nvme discover -t tcp -a "$ADDR" -s 4421 -q "$host" --raw="$RESULTS/$SCENARIO-disc.bin" >/dev/null ||
	fail "nvme discover on the port that allows TLS"
# record_byte N OFF: byte OFF of discovery log record N (0: the first).
record_byte() { od -An -tu1 -j $((1024 * ($1 + 1) + $2)) -N1 "$RESULTS/$SCENARIO-disc.bin" | tr -d ' '; }
found=""
for i in 0 1 2 3; do
	[ "$(dd if="$RESULTS/$SCENARIO-disc.bin" bs=1 skip=$((1024 * (i + 1) + 256)) count=${#sub} status=none)" = "$sub" ] || continue
	found=1
	assert_eq "the subsystem's record: TREQ (not required, SQ flow control disable)" "$(record_byte "$i" 3)" 6
	assert_eq "the subsystem's record: TSAS security type (TLS 1.3)" "$(record_byte "$i" 768)" 2
done
[ -n "$found" ] || fail "no record of $sub in the discovery log"
echo "ok: discovery on the port that allows TLS: sectype tls13, treq not required"

sw0=$(tls_tx_total)
c=$(connect_tls 4420 tls) || fail "connect with TLS to the port that requires it: $(tail -5 "$RESULTS/$SCENARIO-tlshd.log")"
wait_for 20 "the namespace of $c" test -b "/dev/${c}n1"
[ "$(tls_sw)" -ge 4 ] || fail "kernel TLS sockets open: $(tls_sw), want both ends of the admin and I/O queues: $(cat /proc/net/tls_stat)"
echo "kernel TLS sockets open, both ends: $(tls_sw)"
fio_write_verify "/dev/${c}n1" 32 26
[ "$(tls_tx_total)" -gt "$sw0" ] || fail "no kernel TLS transmission counted"
echo "ok: fio write and verify over TLS"
# One handshake per queue: the admin queue and each I/O queue.
assert_eq "TLS handshakes on port 2" "$(metric nvmeof_tgt_tcp_tls_handshakes_total 'port="2",result="ok"')" "$(cat "/sys/class/nvme/$c/queue_count")"
grep -q "TLS secure channel up" "$RESULTS/$SCENARIO-target.log" || fail "no secure channel logged"
nvme disconnect -d "$c" >/dev/null || fail "disconnect $c"

if c=$(connect_tls 4420 2>/dev/null); then
	nvme disconnect -d "$c" >/dev/null
	fail "a connect in clear to the port that requires TLS succeeded"
fi
wait_for 10 "the refusal counted" tls_counted refused
echo "ok: a connect in clear to the port that requires TLS is refused"

put_psk "$wrong"
if c=$(connect_tls 4420 tls 2>/dev/null); then
	nvme disconnect -d "$c" >/dev/null
	fail "a connect with a wrong PSK succeeded"
fi
wait_for 10 "the failed handshake counted" tls_counted failed
grep -q "TLS handshake failed" "$RESULTS/$SCENARIO-target.log" || fail "the failed handshake is not logged"
echo "ok: a wrong PSK: the handshake fails ($(grep "TLS handshake failed" "$RESULTS/$SCENARIO-target.log" | grep -o 'error="[^"]*"' | tail -1 || true))"
# A version 1 identity, whose digest the target checks: the host looks
# for one before version 0, so with the v0 key wrong it must take it.
v1="NVMe1R01 $host $sub UaEMNED0m9JQI/en5wwqXDgM0fgmFsOnkDv0b9hotyg="
printf 98c8c99bd1c78f999ac5c76fdb3bb371a964f790239eed7d6aef9e914fe2be44 | xxd -r -p | # libnvme 1.16.2's
	keyctl padd psk "$v1" "$((16#$ring))" >/dev/null || fail "keyctl padd the version 1 PSK"
c=$(connect_tls 4420 tls) || fail "connect with TLS and a version 1 identity: $(tail -5 "$RESULTS/$SCENARIO-tlshd.log")"
wait_for 20 "the namespace of $c" test -b "/dev/${c}n1"
grep -q "TLS secure channel up.*identity=\"NVMe1R01 " "$RESULTS/$SCENARIO-target.log" || fail "no secure channel with the version 1 identity logged"
dd if="/dev/${c}n1" of=/dev/null bs=64k count=64 iflag=direct status=none || fail "reading through the version 1 channel"
echo "ok: a version 1 identity (PSK digest checked): connected and read"
nvme disconnect -d "$c" >/dev/null || fail "disconnect $c"
# The version 1 key stays: the key ring is not ours to revoke in (its
# keys belong to whoever holds .nvme), and the Linux target, below, finds
# whichever identity the host offers.
put_psk "$psk"
stop_target

# The Linux target, the same host and key, TLS required.
source "$E2E_DIR/../vm/kernel-target.sh"
KT_TRTYPE=tcp kt_load >>"$RESULTS/$SCENARIO-kernel.log" 2>&1 || fail "loading the Linux target"
truncate -s 64M /data/kt-tls.img
loop=$(losetup -f --show /data/kt-tls.img) || fail "losetup"
KT_TRTYPE=tcp kt_port 9 "$ADDR" 4420
echo tls1.3 >$KT_CFS/ports/9/addr_tsas || fail "addr_tsas tls1.3: this kernel's nvmet-tcp has no TLS"
echo required >$KT_CFS/ports/9/addr_treq
kt_subsystem "$sub"
kt_namespace "$sub" 1 "$loop"
kt_link 9 "$sub"
sw0=$(tls_tx_total)
c=$(connect_tls 4420 tls) || fail "connect with TLS to the Linux target: $(tail -5 "$RESULTS/$SCENARIO-tlshd.log")"
wait_for 20 "the Linux target's namespace" test -b "/dev/${c}n1"
fio_write_verify "/dev/${c}n1" 32 27
[ "$(tls_tx_total)" -gt "$sw0" ] || fail "no kernel TLS transmission counted with the Linux target"
echo "ok: the Linux target with TLS required, the same host key ring and tlshd: fio write and verify"
nvme disconnect -d "$c" >/dev/null
kt_clear || fail "tearing the Linux target down"
losetup -d "$loop"

[ -x "${KTLS_TEST:-}" ] || fail "KTLS_TEST='${KTLS_TEST:-}' is not an executable: test/e2e/e2e_test.go builds it"
out=$RESULTS/$SCENARIO-ktls-test.txt
rc=0
(cd "$E2E_DIR/../../ktls" && NVMEOF_REQUIRE_KTLS=1 NVMEOF_REQUIRE_TOOLS=1 "$KTLS_TEST" -test.v -test.count=1 \
	-test.run '^(TestKernelTLS|TestServer)$' -test.timeout 120s) >"$out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "ktls kernel TLS tests failed (exit $rc): $(grep -B2 -A12 -- '--- FAIL' "$out" | head -40; tail -10 "$out")"
for t in TestKernelTLS TestServer; do
	grep -q -- "^--- PASS: $t " "$out" || fail "$t did not run and pass in the guest: $(grep -A3 -- " $t" "$out" | head -6)"
done
if grep -q -- "--- SKIP" "$out"; then fail "a ktls test skipped with NVMEOF_REQUIRE_KTLS: $(grep -A2 -- '--- SKIP' "$out")"; fi
echo "ok: ktls's kernel TLS tests: $(grep -c -- '--- PASS' "$out") passed"
