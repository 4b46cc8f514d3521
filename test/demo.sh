#!/bin/bash
# The demo, on a fresh Debian 12 machine as root: builds nvmeof-tgt, boots a
# QEMU guest with soft-RoCE, serves a file-backed namespace from the guest,
# and connects the guest's own Linux NVMe host to it with nvme-cli and fio.
# The guest's side is test/demo-guest.sh; its output is shown as it runs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
echo "== installing what the demo needs (packages, Go, the guest kernel)"
"$repo/test/install-deps.sh"
export PATH=/usr/local/go/bin:$PATH
bin=$repo/.build/demo/nvmeof-tgt
echo "== building nvmeof-tgt"
CGO_ENABLED=1 go build -ldflags "-X main.version=$(git describe --tags --always --dirty)" -o "$bin" ./cmd/nvmeof-tgt
results=$(mktemp -d /var/tmp/nvmeof-tgt-demo-XXXXXX)
# The file namespace lives on ext4 on this virtio disk: the guest's /tmp
# cannot do O_DIRECT.
truncate -s 2G "$results/disk.img"
echo "== booting the guest (software emulation, about 10 s); results in $results"
# Follow the guest's output live: the results directory is shared over 9p.
tail -n +1 -F "$results/main.log" 2>/dev/null &
follow=$!
rc=0
"$repo/test/vm/run-guest.sh" --script "$repo/test/demo-guest.sh" --results "$results" \
	--disk "$results/disk.img" --env "NVMEOF_TGT=$bin" --timeout 600 || rc=$?
sleep 1
kill "$follow" 2>/dev/null || true
wait "$follow" 2>/dev/null || true
rm -f "$results/disk.img"
if [ "$rc" = 0 ]; then
	echo "== demo finished; logs in $results"
else
	echo "== demo FAILED (status $rc); logs in $results (console.log, main.log, target.log)" >&2
fi
exit "$rc"
