# A queue pair that never sends Connect (test/rdmahost noconnect: an admin
# queue pair accepted by the CM, then silence) is disconnected at the
# connect deadline, 10 s, counted on its port, and its place in
# limits.max_queue_pairs given back.
daemon_only "the connect deadline is nvmeof-tgt's"
config /tmp/tgt.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
limits: {max_queue_pairs: 4}
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: nqn.2026-11.io.example:deadline
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 64MiB}]
CFG
start_target /tmp/tgt.yaml
reserved_is() { [ "$(metric nvmeof_tgt_queue_pairs_reserved)" = "$1" ]; }
out=$RESULTS/$SCENARIO-noconnect.txt
"$RDMAHOST" noconnect -addr "$ADDR" -port "$PORT" -hold 30s -want-closed >"$out" 2>&1 &
nc=$!
wait_for 10 "the silent queue pair reserved" reserved_is 1
wait_for 40 "rdmahost noconnect to end" gone "$nc"
wait "$nc" || fail "rdmahost noconnect: $(cat "$out")"
echo "noconnect: $(cat "$out")"
wait_for 10 "the silent queue pair's place given back" reserved_is 0
echo "ok: queue pairs reserved = 0"
assert_eq "connect timeouts on port 1" "$(metric nvmeof_tgt_connect_timeouts_total 'port="1"')" 1
grep -q "no Connect command on the queue pair in time" "$RESULTS/$SCENARIO-target.log" ||
	fail "the connect timeout was not logged"
stop_target
