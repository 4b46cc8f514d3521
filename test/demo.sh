#!/bin/bash
# The demo, on a fresh Debian 12 machine as root: builds nvmeof-tgt, boots a
# QEMU guest with soft-RoCE, serves a file-backed namespace from the guest,
# and connects the guest's own Linux NVMe host to it with nvme-cli and fio.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
"$repo/test/install-deps.sh"
export PATH=/usr/local/go/bin:$PATH
bin=$repo/.build/demo/nvmeof-tgt
echo "== building nvmeof-tgt"
CGO_ENABLED=1 go build -o "$bin" ./cmd/nvmeof-tgt
results=$(mktemp -d /var/tmp/nvmeof-tgt-demo-XXXXXX)
truncate -s 2G "$results/disk.img"
echo "== booting the guest (software emulation, about 20 s); results in $results"
rc=0
"$repo/test/vm/run-guest.sh" --script "$repo/test/demo-guest.sh" --results "$results" \
	--disk "$results/disk.img" --env "NVMEOF_TGT=$bin" --timeout 600 || rc=$?
cat "$results/main.log"
rm -f "$results/disk.img"
exit "$rc"
