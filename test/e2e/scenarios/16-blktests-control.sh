# blktests' external-target interface on top of `nvmeof-tgt ctl`: what the
# script reports is what a host needs to connect, setup makes the
# subsystem blktests asks for (its namespace carries the requested UUID and
# only the given host gets in), and cleanup takes it away again.
daemon_only "the script drives nvmeof-tgt ctl"
ntc="$E2E_DIR/../blktests/nvme-target-control"
export NVMET_IMG_DIR=/data/blktests NVMET_IMG_SIZE=256MiB
config /tmp/tgt.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems: []
CFG
start_target /tmp/tgt.yaml
uuid=$("$ntc" config --show-subsys-uuid)
subsys=$("$ntc" config --show-subsysnqn)
hostnqn=$("$ntc" config --show-hostnqn)
hostid=$("$ntc" config --show-hostid)
assert_eq "trtype" "$("$ntc" config --show-trtype)" rdma
assert_eq "traddr" "$("$ntc" config --show-traddr)" "$ADDR"
assert_eq "trsvid" "$("$ntc" config --show-trsvid)" "$PORT"
"$ntc" setup --subsysnqn "$subsys" --subsys-uuid "$uuid" --hostnqn "$hostnqn" || fail "setup"
# As blktests connects: with the host identity the script reports.
nvme connect -t rdma -a "$("$ntc" config --show-traddr)" -s "$("$ntc" config --show-trsvid)" \
	-n "$subsys" --hostnqn="$hostnqn" --hostid="$hostid" >/dev/null || fail "connect as blktests does"
dev=$(wait_dev "$subsys")
assert_eq "namespace UUID" "$(cat "/sys/block/$(basename "$dev")/uuid")" "$uuid"
assert_eq "namespace size" "$(blockdev --getsize64 "$dev")" $((256 << 20))
fio_ok bt --filename="$dev" --rw=randwrite --bs=8k --iodepth=8 --ioengine=libaio --direct=1 --size=16m --verify=crc32c
disconnect "$subsys"
# Any other host is refused.
if nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$subsys" \
	--hostnqn=nqn.2014-08.org.nvmexpress:uuid:77777777-7777-7777-7777-777777777777 >/dev/null 2>&1; then
	fail "a host blktests did not name got in"
fi
# A malformed host key is refused by the daemon, naming the field.
if out=$("$ntc" setup --subsysnqn "$subsys" --subsys-uuid "$uuid" --hostnqn "$hostnqn" --hostkey DHHC-1:00:abc: 2>&1); then
	fail "setup with a malformed host key succeeded"
fi
echo "$out" | grep -q "dhchap_key" || fail "setup with a malformed host key: $out"
# A good one lands on the host's entry (authenticating takes a host kernel
# with CONFIG_NVME_HOST_AUTH).
"$ntc" setup --subsysnqn "$subsys" --subsys-uuid "$uuid" --hostnqn "$hostnqn" \
	--hostkey DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n: || fail "setup with a host key"
assert_eq "hosts that authenticate" "$("$NVMEOF_TGT" ctl list -json | jq -r '.subsystems[0].dhchap_hosts[0]')" "$hostnqn"
# Now the host must authenticate: one that does not (here, a kernel built
# without NVMe authentication, which gives up at AUTHREQ) gets nothing.
if nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$subsys" --hostnqn="$hostnqn" --hostid="$hostid" >/dev/null 2>&1; then
	fail "a host that did not authenticate got in"
fi
no_controllers() { [ "$("$NVMEOF_TGT" ctl list -json | jq '.subsystems[0].controllers | length')" = 0 ]; }
wait_for 10 "the refused host's controller going" no_controllers
# Setup twice is fine (a leftover subsystem is replaced), cleanup removes all.
"$ntc" setup --subsysnqn "$subsys" --subsys-uuid "$uuid" --hostnqn "$hostnqn" || fail "setup again"
"$ntc" cleanup --subsysnqn "$subsys" || fail "cleanup"
assert_eq "subsystems after cleanup" "$("$NVMEOF_TGT" ctl list -json | jq '.subsystems | length')" 0
[ ! -e "/data/blktests/$subsys.img" ] || fail "cleanup left the image file"
"$ntc" cleanup --subsysnqn "$subsys" || fail "cleanup of a missing subsystem"
stop_target
