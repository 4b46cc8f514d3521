# A port with inline_data_size: 0 carries no in-capsule data: the Linux
# host sees IOCCSZ 4 (the 64-byte command alone) and no SGL offset
# support, so it sends even 4 KiB writes as keyed descriptors the target
# reads by RDMA READ; the data must come back intact. `ctl save` keeps the
# 0, and the daemon started from the saved file serves the same way.
nqn=nqn.2026-11.io.example:inline0
config /tmp/tgt.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT, inline_data_size: 0}]
subsystems:
  - nqn: $nqn
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: /data/inline0.img, size: 64MiB}]
CFG
# check_inline_off: connect, check what Identify Controller says, move
# verified data, disconnect.
check_inline_off() {
	local dev ctrl idctrl
	dev=$(connect "$nqn")
	ctrl=/dev/$(ctrl_of "$nqn")
	idctrl=$(nvme id-ctrl "$ctrl" -o json)
	assert_eq "id-ctrl ioccsz (16-byte units)" "$(echo "$idctrl" | jq -r .ioccsz)" 4
	# SGLS bit 20: offsets in in-capsule data, which the Linux host needs
	# before it sends any.
	assert_eq "id-ctrl sgls offset bit" "$(($(echo "$idctrl" | jq -r .sgls) >> 20 & 1))" 0
	local common=(--filename="$dev" --ioengine=libaio --direct=1 --iodepth=8 --bsrange=512-16k --size=8m
		--verify=crc32c --verify_state_save=0 --randrepeat=1 --randseed=75)
	fio_ok "write-$1" --rw=randwrite --do_verify=0 "${common[@]}"
	fio_ok "verify-$1" --rw=randwrite --verify_only=1 "${common[@]}"
	[ "$FIO_READ" -ge $((8 << 20)) ] || fail "verify pass read only $FIO_READ bytes"
	disconnect "$nqn"
}
start_target /tmp/tgt.yaml
check_inline_off first
if ours; then
	"$NVMEOF_TGT" ctl save /tmp/saved.yaml || fail "ctl save"
	grep -q "inline_data_size: 0$" /tmp/saved.yaml || fail "the saved configuration lost inline_data_size: 0: $(grep inline /tmp/saved.yaml)"
	echo "ok: ctl save keeps inline_data_size: 0"
	stop_target
	start_target /tmp/saved.yaml
	check_inline_off saved
fi
stop_target
