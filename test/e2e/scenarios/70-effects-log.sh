# The Commands Supported and Effects log (LID 05h) as the Linux host reads
# it: every command the target dispatches is listed with its effects, and
# an opcode the log leaves out gets Invalid Command Opcode when sent.
daemon_only "the effects log lists nvmeof-tgt's own command table"
nqn=nqn.2026-11.io.example:effects
serve_file "$nqn" /data/effects.img 16MiB
dev=$(connect "$nqn")
ctrl=/dev/$(ctrl_of "$nqn")

# The page as the host reads it (LID 05h), raw; nvme effects-log shows it
# decoded for the log.
nvme get-log "$ctrl" --log-id=5 --log-len=4096 -b >/tmp/effects.bin || fail "nvme get-log 05h"
assert_eq "effects log size" "$(stat -c %s /tmp/effects.bin)" 4096
nvme effects-log "$ctrl" --csi=0 || echo "nvme effects-log exited $? (the raw page above is what is checked)"
# effects IO OPCODE: the dword of an admin (io=0) or I/O (io=1) opcode,
# from the page's dwords read once (admin at 0, I/O at 256).
mapfile -t dwords < <(od -An -tu4 -v -w4 /tmp/effects.bin | tr -d ' ')
assert_eq "effects log dwords" "${#dwords[@]}" 1024
effects() { echo "${dwords[$(($1 * 256 + $2))]}"; }

# CSUPP = 1; LBCC = 2: the command changes logical block contents.
for op in 0x02 0x06 0x08 0x09 0x0a 0x0c 0x18; do
	assert_eq "admin opcode $op effects" "$(effects 0 $op)" 1
done
# Flush, Read, Compare and the reservation commands (Register, Report,
# Acquire, Release).
for op in 0x00 0x02 0x05 0x0d 0x0e 0x11 0x15; do
	assert_eq "I/O opcode $op effects" "$(effects 1 $op)" 1
done
for op in 0x01 0x08 0x09; do
	assert_eq "I/O opcode $op effects" "$(effects 1 $op)" 3
done
supported_admin=0 supported_io=0
for op in $(seq 0 255); do
	[ "${dwords[op]}" = 0 ] || supported_admin=$((supported_admin + 1))
	[ "${dwords[256 + op]}" = 0 ] || supported_io=$((supported_io + 1))
done
assert_eq "admin opcodes listed" "$supported_admin" 7
assert_eq "I/O opcodes listed" "$supported_io" 10

# Opcodes the log leaves out are refused as such: Write Uncorrectable
# (I/O 04h) and Format NVM (admin 80h).
assert_eq "Write Uncorrectable not listed" "$(effects 1 0x04)" 0
if out=$(nvme io-passthru "$dev" --opcode=0x04 --namespace-id=1 --cdw10=0 --cdw12=0 2>&1); then
	fail "Write Uncorrectable succeeded: $out"
fi
echo "$out" | grep -qi "opcode" || fail "Write Uncorrectable not refused as an invalid opcode: $out"
echo "ok: I/O opcode 0x04 refused ($out)"
assert_eq "Format NVM not listed" "$(effects 0 0x80)" 0
if out=$(nvme admin-passthru "$ctrl" --opcode=0x80 --namespace-id=1 2>&1); then
	fail "Format NVM succeeded: $out"
fi
echo "$out" | grep -qi "opcode" || fail "Format NVM not refused as an invalid opcode: $out"
echo "ok: admin opcode 0x80 refused ($out)"
disconnect "$nqn"
stop_target
