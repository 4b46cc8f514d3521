# Bounded resources as a real host meets them: a host asking for more I/O
# queues than max_io_queues gets fewer and does I/O; a controller past
# max_controllers and a queue pair past limits.max_queue_pairs are refused
# cleanly (no retries) and counted; discovery keeps working, and a
# persistent discovery controller connected without keep alive gets the
# 120 s default.
daemon_only "the limits are nvmeof-tgt configuration"
small=nqn.2026-11.io.example:small
other=nqn.2026-11.io.example:other
h1=nqn.2014-08.org.nvmexpress:uuid:31313131-3131-3131-3131-313131313131
h2=nqn.2014-08.org.nvmexpress:uuid:32323232-3232-3232-3232-323232323232
config /tmp/tgt.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
limits: {max_queue_pairs: 4}
ports: [{id: 1, address: $ADDR, port: $PORT}, {id: 2, address: $ADDR, port: 4421}]
subsystems:
  - nqn: $small
    allow_any_host: true
    max_controllers: 1
    max_io_queues: 1
    namespaces: [{nsid: 1, backend: nullblk, size: 256MiB}]
  - nqn: $other
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 256MiB}]
CFG
start_target /tmp/tgt.yaml

# wait_reserved N: the daemon's queue pairs settle at N (a disconnected
# queue pair gives its place back once its teardown ran).
wait_reserved() {
	poll 10 reserved_is "$1" || fail "queue pairs reserved: got '$(metric nvmeof_tgt_queue_pairs_reserved)', want '$1'"
	echo "ok: queue pairs reserved = $1"
}
reserved_is() { [ "$(metric nvmeof_tgt_queue_pairs_reserved)" = "$1" ]; }
wait_reserved 0
assert_eq "queue pair limit gauge" "$(metric nvmeof_tgt_queue_pairs_limit)" 4

# Asking for 2 read and 2 write queues, the host gets the 1 allowed.
dev=$(connect "$small" --hostnqn="$h1" --hostid=31313131-3131-3131-3131-313131313131 --nr-io-queues=2 --nr-write-queues=2)
c=$(ctrl_of "$small")
assert_eq "queue_count of $c (admin + 1 I/O)" "$(cat /sys/class/nvme/$c/queue_count)" 2
fio_ok io --filename="$dev" --rw=randrw --bs=4k --iodepth=16 --ioengine=libaio --direct=1 --size=4m
wait_reserved 2

# A second controller on the subsystem: Controller Busy with DNR, so the
# host gives up at once instead of retrying.
start=$SECONDS
if nvme connect -t rdma -a "$ADDR" -s 4421 -n "$small" --hostnqn="$h2" --hostid=32323232-3232-3232-3232-323232323232 2>/tmp/busy; then
	fail "a controller past max_controllers connected"
fi
echo "ok: refused in $((SECONDS - start)) s: $(cat /tmp/busy)"
[ $((SECONDS - start)) -lt 10 ] || fail "refused connect took $((SECONDS - start)) s: the host retried"
assert_eq "controller_limit refusals" "$(metric nvmeof_tgt_connects_refused_total 'reason="controller_limit"')" 1
wait_reserved 2

# The other subsystem takes the last two queue pairs: an admin queue and
# the one I/O queue left, although the host asks for two.
dev2=$(connect "$other" --hostnqn="$h2" --hostid=32323232-3232-3232-3232-323232323232)
c2=$(ctrl_of "$other")
assert_eq "queue_count of $c2 (admin + the 1 I/O queue left)" "$(cat /sys/class/nvme/$c2/queue_count)" 2
fio_ok io2 --filename="$dev2" --rw=randread --bs=4k --iodepth=8 --ioengine=libaio --direct=1 --size=2m
wait_reserved 4

# Now even discovery is refused at the RDMA connection request.
if nvme discover -t rdma -a "$ADDR" -s "$PORT" >/tmp/disc 2>&1; then
	fail "discovery connected past limits.max_queue_pairs"
fi
echo "ok: discovery refused while the limit is reached"
[ "$(metric nvmeof_tgt_connects_refused_total 'reason="queue_pair_limit"')" -ge 1 ] || fail "queue_pair_limit refusals not counted"

disconnect "$other"
wait_reserved 2
n=$(nvme discover -t rdma -a "$ADDR" -s "$PORT" -o json | jq '[.records[] | select(.subtype == "nvme subsystem")] | length')
assert_eq "subsystems discovered once a place is free" "$n" 2

# A persistent discovery controller without keep alive: the target keeps
# it for 120 s rather than for ever.
nvme connect -t rdma -a "$ADDR" -s "$PORT" -n nqn.2014-08.org.nvmexpress.discovery --keep-alive-tmo=0 >/dev/null 2>&1 ||
	nvme connect -t rdma -a "$ADDR" -s "$PORT" -n nqn.2014-08.org.nvmexpress.discovery >/dev/null || fail "persistent discovery connect"
grep 'controller created' "$RESULTS/$SCENARIO-target.log" | grep 'subsystem=nqn.2014-08.org.nvmexpress.discovery' | grep -q 'kato_ms=120000' ||
	fail "no discovery controller with the 120 s default keep alive in the target log"
echo "ok: discovery controller created with kato_ms=120000"
dc=""
for x in /sys/class/nvme/nvme*; do
	[ "$(cat "$x/subsysnqn")" = nqn.2014-08.org.nvmexpress.discovery ] && dc=$(basename "$x")
done
[ -n "$dc" ] || fail "no persistent discovery controller on the host"
kato=$(nvme get-feature "/dev/$dc" -f 0x0f -H 2>&1) || fail "get-feature KATO on the discovery controller: $kato"
echo "$kato" | grep -q 120000 || fail "get-feature KATO on the discovery controller: $kato"
echo "ok: get-feature KATO: $(echo "$kato" | head -1)"
nvme disconnect-all >/dev/null
wait_reserved 0
stop_target
