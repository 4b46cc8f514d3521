#!/bin/bash
# Runs every scenario inside the guest, one after the other, each in its
# own shell: RESULTS/<name>.log holds its output, RESULTS/<name>.rc its exit
# status. E2E_DIR and NVMEOF_TGT come from the host.
export RESULTS=/results
mkdir -p /data
# A virtio disk with ext4, so file namespaces use O_DIRECT as in production.
if [ -b /dev/vda ]; then
	mkfs.ext4 -q -F /dev/vda && mount /dev/vda /data
fi
for s in "$E2E_DIR"/scenarios/*.sh; do
	name=$(basename "$s" .sh)
	if [ -n "${E2E_ONLY:-}" ] && ! [[ $name =~ $E2E_ONLY ]]; then
		continue
	fi
	echo "$name" >>"$RESULTS/scenarios.list"
	start=$SECONDS
	SCENARIO=$name bash -c 'source "$E2E_DIR/lib.sh"; source "$1"' _ "$s" >"$RESULTS/$name.log" 2>&1 </dev/null
	echo $? >"$RESULTS/$name.rc"
	echo "$name: rc $(cat "$RESULTS/$name.rc") in $((SECONDS - start)) s" | tee /dev/console
	nvme disconnect-all >/dev/null 2>&1 || true
	pkill -9 -f "$NVMEOF_TGT" 2>/dev/null || true
done
