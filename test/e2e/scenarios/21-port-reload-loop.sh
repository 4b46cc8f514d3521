# A port with a connected host is removed and added back by reload, ten
# times, while fio with crc32c verification runs on a subsystem reached
# through another port. Each removal disconnects the removed port's host
# (which keeps trying to reconnect while the port closes, and gets back
# in once it returns); the other port's I/O sees no error and the daemon
# lives on.
daemon_only "SIGHUP reload is nvmeof-tgt's"
steady=nqn.2026-11.io.example:steady21
moving=nqn.2026-11.io.example:moving21
rounds=10
write_config() { # extra ports
	config /tmp/tgt.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
ports: [{id: 1, address: $ADDR, port: $PORT}$1]
subsystems:
  - {nqn: $steady, allow_any_host: true, namespaces: [{nsid: 1, backend: file, path: /data/steady21.img, size: 256MiB}]}
  - {nqn: $moving, allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 64MiB}]}
CFG
}
port2=", {id: 2, address: $ADDR, port: 4421}"
write_config "$port2"
start_target /tmp/tgt.yaml
log=$RESULTS/$SCENARIO-target.log
sdev=$(connect "$steady")
nvme connect -t rdma -a "$ADDR" -s 4421 -n "$moving" --ctrl-loss-tmo=600 --reconnect-delay=1 >/dev/null || fail "connect $moving on port 2"
mdev=$(wait_dev "$moving")
mc=$(ctrl_of "$moving")
echo "steady $sdev, moving $mdev ($mc)"

# fio verifying what it writes, until the rounds are over.
fio_start steady --filename="$sdev" --rw=randwrite --bs=4k --iodepth=16 --ioengine=libaio --direct=1 \
	--size=64m --verify=crc32c --verify_backlog=256

# wait_state CTRL PATTERN SECONDS: until the controller's state matches.
wait_state() {
	poll "$3" ctrl_state_is "$1" "$2" || fail "$1 state '$(cat "/sys/class/nvme/$1/state" 2>/dev/null || echo gone)' after $3 s, want $2"
}
gen=1
for round in $(seq "$rounds"); do
	write_config ""
	kill -HUP "$TARGET_PID"
	gen=$((gen + 1))
	wait_state "$mc" '^(connecting|resetting)$' 15
	write_config "$port2"
	kill -HUP "$TARGET_PID"
	gen=$((gen + 1))
	wait_state "$mc" '^live$' 30
	kill -0 "$TARGET_PID" 2>/dev/null || fail "daemon died in round $round: $(tail -20 "$log")"
	gone "$FIO_PID" && fail "fio on the steady port ended in round $round: $(tail -5 "$RESULTS/$SCENARIO-steady.out")"
	echo "round $round: port 2 removed (host disconnected) and back (host reconnected)"
done
assert_eq "configuration generation" "$(metric nvmeof_tgt_config_generation)" "$gen"
assert_eq "port removals logged" "$(grep -c 'msg="port removed"' "$log")" "$rounds"
dd if="$mdev" of=/dev/null bs=1M count=8 iflag=direct status=none || fail "I/O on the moving subsystem after the last round"
fio_finish steady
if grep -F "controller removed" "$log" | grep -qF "$steady"; then
	fail "the steady subsystem's controller was disturbed"
fi
! grep -q "panic" "$log" || fail "panic in the daemon log"
nvme disconnect-all >/dev/null
stop_target
