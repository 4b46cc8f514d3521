# Both I/O engines on a file namespace (O_DIRECT on ext4): each reports
# itself in the start log and in nvmeof_tgt_io_engine, passes a fio verify
# run, and a 4 KiB random read at queue depth 32 runs with each, for
# ENGINES_READ_SECONDS (5; docs/performance.md's figures come from runs
# of 20), its rate recorded, not asserted: timings in a shared TCG guest
# are noise.
daemon_only "io_engine is nvmeof-tgt's"
nqn=nqn.2026-11.io.example:engines
img=/data/engines.img
# Real blocks, so reads reach the disk rather than a hole.
dd if=/dev/zero of="$img" bs=1M count=128 oflag=direct status=none || fail "writing $img"
for engine in threads io_uring; do
	log=$RESULTS/$SCENARIO-$engine-target.log
	config /tmp/tgt.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
io_engine: $engine
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $nqn
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: $img}]
CFG
	start_target /tmp/tgt.yaml "$log"
	grep -q "io_engine=$engine" "$log" || fail "start log does not name io_engine=$engine: $(grep -m1 serving "$log")"
	assert_eq "nvmeof_tgt_io_engine{engine=\"$engine\"}" "$(metric nvmeof_tgt_io_engine "engine=\"$engine\"")" 1
	dev=$(connect "$nqn")
	verify=(--filename="$dev" --ioengine=libaio --direct=1 --iodepth=32 --bsrange=4k-128k --size=32m
		--verify=crc32c --verify_state_save=0 --randrepeat=1 --randseed=7)
	fio_ok "verify-$engine" --rw=randwrite "${verify[@]}"
	fio_ok "randread-$engine" --filename="$dev" --rw=randread --bs=4k --iodepth=32 --ioengine=libaio \
		--direct=1 --size=128m --runtime="${ENGINES_READ_SECONDS:-5}" --time_based
	iops=$(jq '.jobs[0].read.iops | floor' "$RESULTS/$SCENARIO-randread-$engine.json")
	lat=$(jq '.jobs[0].read.clat_ns.mean / 1000 | floor' "$RESULTS/$SCENARIO-randread-$engine.json")
	echo "io_engine $engine: 4k randread QD32 $iops IOPS, mean completion latency $lat us" | tee -a "$RESULTS/$SCENARIO-figures.txt"
	disconnect "$nqn"
	stop_target
done
