# Small commands beside a 1 MiB streamer on a small buffer pool: one host
# streams 1 MiB reads at queue depth 16 through a 4 MiB rdma.buffer_pool
# (four 1 MiB blocks: the streamer alone keeps it dry) while another reads
# 4 KiB at queue depth 1. The 4 KiB reads must go on, at 3 IOPS or more
# (under 1 when a small command waited behind every 1 MiB one queued
# before it; 600 to 750 in the test command's runs since), and the
# streamer too; the 4 KiB completion
# latency and the pool's waits are printed for the Performance section of
# docs/performance.md.
daemon_only "the buffer pool is nvmeof-tgt's"
big=nqn.2026-11.io.example:stream
small=nqn.2026-11.io.example:small
config /tmp/tgt.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
rdma: {buffer_pool: 4MiB}
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $big
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]
  - nqn: $small
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]
CFG
start_target /tmp/tgt.yaml
bigdev=$(connect "$big" --nr-io-queues=1)
smalldev=$(connect "$small" --nr-io-queues=1)
secs=${POOL_MIX_SECONDS:-12}
fio --name=stream --filename="$bigdev" --ioengine=libaio --direct=1 --rw=read --bs=1m --iodepth=16 \
	--time_based --runtime="$secs" --output-format=json --output="$RESULTS/$SCENARIO-stream.json" &
stream=$!
fio_ok small --filename="$smalldev" --ioengine=libaio --direct=1 --rw=randread --bs=4k --iodepth=1 \
	--time_based --runtime="$secs"
wait "$stream" || fail "the streamer's fio failed: $(tail -20 "$RESULTS/$SCENARIO-stream.json")"
sj=$RESULTS/$SCENARIO-small.json
p99=$(jq '.jobs[0].read.clat_ns.percentile["99.000000"] / 1000 | floor' "$sj")
mean=$(jq '.jobs[0].read.clat_ns.mean / 1000 | floor' "$sj")
iops=$(jq '.jobs[0].read.iops | floor' "$sj")
mibs=$(jq '.jobs[0].read.bw_bytes / 1048576 | floor' "$RESULTS/$SCENARIO-stream.json")
waits=$(metric nvmeof_tgt_rdma_buffer_pool_waits_total) over=$(metric nvmeof_tgt_rdma_buffer_pool_over_share_total)
echo "4 KiB QD1 beside the streamer: $iops IOPS, completion latency mean $mean µs, p99 $p99 µs; streamer $mibs MiB/s; pool waits $waits, past the share $over"
# The streamer was held back (the pool dry, or past its queue pair's
# share): otherwise the reads never met it and the check proves nothing.
[ "$(printf '%.0f' "${waits:-0}")" -gt 0 ] || [ "$(printf '%.0f' "${over:-0}")" -gt 0 ] ||
	fail "the streamer never waited for a buffer: the pool was not contended"
[ "$iops" -ge 3 ] || fail "4 KiB reads beside the streamer: $iops IOPS, want 3 or more"
[ "$mibs" -gt 0 ] || fail "the streamer made no progress: $mibs MiB/s"
disconnect "$small"
disconnect "$big"
stop_target
