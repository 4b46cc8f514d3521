# /metrics during and after fio: the per-namespace counters match the I/O
# fio reports, the latency histograms fill, and the subsystem gauges see
# the connected controller.
daemon_only "the Prometheus endpoint is nvmeof-tgt's"
nqn=nqn.2026-11.io.example:metrics
serve "$nqn" "[{nsid: 1, backend: nullblk, size: 1GiB}]" "$METRICS_ON"
dev=$(connect "$nqn")
base_r=$(metric nvmeof_tgt_read_bytes_total)
base_w=$(metric nvmeof_tgt_written_bytes_total)
# Scrape while fio runs: the endpoint answers under load.
fio_start load --filename="$dev" --rw=randrw --bs=64k --iodepth=8 --ioengine=libaio --direct=1
# written_moved: the write counter grew while fio still runs.
written_moved() {
	gone "$FIO_PID" && fail "fio ended before a scrape saw its writes"
	[ "$(printf '%.0f' "$(metric nvmeof_tgt_written_bytes_total)")" -gt "$(printf '%.0f' "$base_w")" ]
}
wait_for 10 "written bytes moving during fio" written_moved
fio_finish load
base_r=$(metric nvmeof_tgt_read_bytes_total)
base_w=$(metric nvmeof_tgt_written_bytes_total)
fio_ok w --filename="$dev" --rw=randwrite --bs=16k --iodepth=16 --ioengine=libaio --direct=1 --size=32m
w=$FIO_WRITTEN
fio_ok r --filename="$dev" --rw=randread --bs=16k --iodepth=16 --ioengine=libaio --direct=1 --size=16m
r=$FIO_READ
got_w=$(awk -v a="$(metric nvmeof_tgt_written_bytes_total)" -v b="$base_w" 'BEGIN{printf "%.0f", a-b}')
got_r=$(awk -v a="$(metric nvmeof_tgt_read_bytes_total)" -v b="$base_r" 'BEGIN{printf "%.0f", a-b}')
echo "fio wrote $w, target counted $got_w; fio read $r, target counted $got_r"
awk -v a="$got_w" -v b="$w" 'BEGIN{exit !(a >= b && a <= b * 1.03)}' || fail "written bytes $got_w vs fio $w"
awk -v a="$got_r" -v b="$r" 'BEGIN{exit !(a >= b && a <= b * 1.03)}' || fail "read bytes $got_r vs fio $r"
reads=$(metric nvmeof_tgt_reads_completed_total)
hist=$(metric nvmeof_tgt_read_latency_seconds_count)
assert_eq "read latency histogram count" "$hist" "$reads"
[ "$(printf '%.0f' "$(metric nvmeof_tgt_write_latency_seconds_bucket 'le="+Inf"')")" -gt 0 ] || fail "write histogram empty"
assert_eq "controllers gauge" "$(metric nvmeof_tgt_controllers)" 1
assert_eq "queue pairs gauge (admin + 2 I/O)" "$(metric nvmeof_tgt_queue_pairs)" 3
[ "$(metric nvmeof_tgt_build_info)" = 1 ] || fail "no build info"
[ "$(printf '%.0f' "$(metric nvmeof_tgt_registered_memory_bytes)")" -gt 0 ] || fail "no registered memory"
curl -fsS http://127.0.0.1:9750/metrics | grep -E '^nvmeof_tgt_(poller|config)' 
disconnect "$nqn"
stop_target
