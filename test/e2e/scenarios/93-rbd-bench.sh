# 4 KiB random reads and writes at queue depth 32 on an RBD namespace,
# next to `rbd bench` (librbd directly, 32 in flight) on the same image:
# the ratio is what the NVMe-oF path costs. Figures only; everything runs
# emulated on 2 vCPUs, so only the ratio means anything. docs/ceph.md
# quotes it.
daemon_only "the rbd backend is nvmeof-tgt's"
ceph_up
nqn=nqn.2026-11.io.example:rbd4
img=$CEPH_POOL/bench
rbd_admin create --size 64M "$img" >/dev/null 2>&1 || fail "rbd create"
# Every object written, so reads read data.
rbd_admin bench --io-type write --io-pattern seq --io-size 4M --io-threads 4 --io-total 64M "$img" >/dev/null 2>&1 || fail "rbd bench fill"
rbd_iops() { # read|write
	timeout 120 rbd --conf "$CEPH_CONF" --id "$CEPH_USER" --keyring "$CEPH_KEYRING" bench --io-type "$1" --io-pattern rand \
		--io-size 4K --io-threads 32 --io-total 32M "$img" 2>&1 | awk '/^elapsed:/ {print int($6)}'
}
rr=$(rbd_iops read)
rw=$(rbd_iops write)
serve_rbd "$nqn" bench 64MiB
dev=$(connect "$nqn")
fio_iops() { # randread|randwrite
	local out=$RESULTS/$SCENARIO-$1.json
	fio --name="$1" --filename="$dev" --ioengine=libaio --direct=1 --rw="$1" --bs=4k --iodepth=32 \
		--time_based --runtime=8 --output-format=json --output="$out" || fail "fio $1"
	assert_eq "fio $1 errors" "$(jq '[.jobs[].error] | add' "$out")" 0 >&2
	jq -r "[.jobs[].${1#rand}.iops] | add | floor" "$out"
}
fr=$(fio_iops randread)
fw=$(fio_iops randwrite)
disconnect "$nqn"
stop_target
[ "${rr:-0}" -gt 0 ] && [ "${rw:-0}" -gt 0 ] || fail "rbd bench gave no figures (read '$rr', write '$rw')"
printf '%-28s %10s %10s %6s\n' "4k QD32" "rbd bench" "nvmeof" ratio
printf '%-28s %10d %10d %6.2f\n' "random read IOPS" "$rr" "$fr" "$(echo "$fr / $rr" | bc -l)"
printf '%-28s %10d %10d %6.2f\n' "random write IOPS" "$rw" "$fw" "$(echo "$fw / $rw" | bc -l)"
