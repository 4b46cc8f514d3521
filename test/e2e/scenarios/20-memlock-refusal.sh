# Locked memory runs out: a daemon without CAP_IPC_LOCK, under a 64 MiB
# locked-memory limit. First, the default buffer pool (128 MiB) does not
# fit: the daemon refuses to start and says which key to lower. Then, with
# a 16 MiB pool and no shared receive queue, each I/O queue registers its
# own receive ring at connect, 16 MiB at 128 KiB of in-capsule data: the
# first host's queues fit, the ones it cannot set up for a second host are
# refused with the CM reject "no resources" and counted; the daemon lives
# on and the first host's I/O (fio with verification) never notices.
daemon_only "locked-memory handling is nvmeof-tgt's"
nqn=nqn.2026-11.io.example:memlock
h1=nqn.2014-08.org.nvmexpress:uuid:20202020-0000-0000-0000-000000000001
h2=nqn.2014-08.org.nvmexpress:uuid:20202020-0000-0000-0000-000000000002

# The results directory holding the binary is root's alone; nobody needs
# a copy it can run. rdma_cm and uverbs device nodes are 0666 (set by
# their kernel drivers), so nobody can open them: check, do not chmod.
install -m 0755 "$NVMEOF_TGT" /tmp/nvmeof-tgt-20
for f in /dev/infiniband/rdma_cm /dev/infiniband/uverbs*; do
	setpriv --reuid=nobody --regid=nogroup --clear-groups test -r "$f" -a -w "$f" ||
		fail "$f is not usable by nobody: $(ls -l "$f")"
done
cat >/tmp/nvmeof-tgt-nobody <<'SH'
#!/bin/sh
exec prlimit --memlock=67108864 setpriv --reuid=nobody --regid=nogroup --clear-groups /tmp/nvmeof-tgt-20 "$@"
SH
chmod 0755 /tmp/nvmeof-tgt-nobody
NVMEOF_TGT=/tmp/nvmeof-tgt-nobody
log=$RESULTS/$SCENARIO-target.log
touch "$log"

config /tmp/tgt-default.yaml <<CFG
control: {socket: /tmp/nvmeof-tgt-20.sock}
state_file: /tmp/nvmeof-tgt-20-state.json
ports: [{id: 1, address: $ADDR, port: $PORT}]
CFG
if "$NVMEOF_TGT" -config /tmp/tgt-default.yaml >"$RESULTS/$SCENARIO-default.log" 2>&1; then
	fail "the daemon started although its buffer pool cannot be locked"
fi
grep -q "rdma.buffer_pool" "$RESULTS/$SCENARIO-default.log" || fail "the refusal does not name rdma.buffer_pool: $(tail -3 "$RESULTS/$SCENARIO-default.log")"
echo "ok: refused to start: $(grep -o 'locked-memory limit.*' "$RESULTS/$SCENARIO-default.log" | head -1 | cut -c1-200)"

config /tmp/tgt.yaml <<CFG
control: {socket: /tmp/nvmeof-tgt-20.sock}
state_file: /tmp/nvmeof-tgt-20-state.json
metrics: {address: 127.0.0.1:9750}
rdma: {buffer_pool: 16MiB, shared_receive_queue: false}
ports: [{id: 1, address: $ADDR, port: $PORT, inline_data_size: 131072}, {id: 2, address: $ADDR, port: 4421, inline_data_size: 131072}]
subsystems:
  - nqn: $nqn
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: /data/memlock.img, size: 256MiB}]
CFG
# fio verifies what it reads back, so the namespace keeps data: a file
# the daemon's user may write.
truncate -s 256M /data/memlock.img
chown nobody:nogroup /data/memlock.img
start_target /tmp/tgt.yaml "$log"
assert_eq "daemon user" "$(ps -o user= -p "$TARGET_PID")" nobody
grep -q "Max locked memory *67108864" "/proc/$TARGET_PID/limits" || fail "memlock limit not applied: $(grep locked "/proc/$TARGET_PID/limits")"

nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$nqn" --nr-io-queues=2 --hostnqn="$h1" \
	--hostid=20202020-0000-0000-0000-000000000001 >/dev/null || fail "connect host 1: $(tail -5 "$log")"
dev=$(wait_dev "$nqn")
echo "host 1 on $dev"
fio_start host1 --filename="$dev" --rw=randwrite --bs=4k --iodepth=16 --ioengine=libaio --direct=1 \
	--size=32m --verify=crc32c --verify_backlog=256
# writing N: host 1's path has completed N writes (the multipath head
# keeps no statistics on 6.1), so its I/O runs through the refusals.
c1=$(ctrl_of "$nqn") || fail "no live controller for host 1"
p1=/sys/class/nvme/$c1/$(path_of "$c1" 1)/stat
writing() { [ "$(awk '{ print $5 }' "$p1")" -ge "$1" ]; }
wait_for 30 "host 1 writing" writing 64

# A second host (through port 2: nvme-cli allows one connection per
# address and service) and then a third try: their I/O queues do not fit.
refusals=0
for try in 1 2; do
	if nvme connect -t rdma -a "$ADDR" -s 4421 -n "$nqn" --nr-io-queues=2 --hostnqn="$h2" \
		--hostid=20202020-0000-0000-0000-000000000002 >/tmp/connect2 2>&1; then
		fail "host 2 connected although locked memory cannot hold its queues"
	fi
	refusals=$((refusals + 1))
	echo "ok: host 2 refused (try $try): $(tail -1 /tmp/connect2)"
done
kill -0 "$TARGET_PID" 2>/dev/null || fail "the daemon died: $(tail -20 "$log")"
grep -q "cannot set up queue pair" "$log" || fail "no refusal logged: $(tail -20 "$log")"
grep "cannot set up queue pair" "$log" | head -1 | grep -q "LimitMEMLOCK" || fail "the refusal does not say what to change: $(grep 'cannot set up' "$log" | head -1)"
echo "ok: $(grep 'cannot set up queue pair' "$log" | head -1 | cut -c1-400)"
got=$(metric nvmeof_tgt_rdma_connections_rejected_total 'reason="no_resources"')
[ -n "$got" ] && [ "$got" -ge "$refusals" ] || fail "rejected connections metric $got, want at least $refusals"
echo "ok: nvmeof_tgt_rdma_connections_rejected_total{reason=no_resources} = $got"
! grep -q "panic" "$log" || fail "panic in the daemon log"

fio_finish host1
c=$(ctrl_of "$nqn") || fail "host 1's controller is not live"
assert_eq "host 1 controller state" "$(cat /sys/class/nvme/$c/state)" live
# The memory of the refused queues came back: host 2 fits once host 1 leaves.
nvme disconnect-all >/dev/null
nvme connect -t rdma -a "$ADDR" -s 4421 -n "$nqn" --nr-io-queues=2 --hostnqn="$h2" \
	--hostid=20202020-0000-0000-0000-000000000002 >/dev/null || fail "host 2 refused with host 1 gone: $(tail -5 "$log")"
dev2=$(wait_dev "$nqn")
dd if="$dev2" of=/dev/null bs=1M count=8 iflag=direct status=none || fail "host 2 I/O"
echo "ok: host 2 served once host 1 left"
nvme disconnect-all >/dev/null
stop_target
