#!/bin/bash
# Runs blktests against nvmeof-tgt in the test guest, through
# nvme-target-control: the daemon starts with one port of the transport
# NVMET_TRTYPES names (rdma, the default, or tcp) and no subsystem, and
# blktests makes each test's subsystem itself.
#
#   E2E_KERNEL=6.12 test/vm/run-guest.sh --script test/blktests/guest-check.sh \
#       --results DIR --env NVMEOF_TGT=/path/to/nvmeof-tgt --env SRC=$PWD \
#       --env BLKTESTS=/path/to/blktests [--env TESTS='nvme/041 nvme/042'] [--disk IMG] \
#       [--env NVMET_CFS_BIN=/path/to/nvmet-cfs] [--env PORTS=N] [--env NVMET_SETUP_NAMESPACE=no]
#       [--env NVMET_TRTYPES=tcp] [--env NVMET_SETUP_RESERVATIONS=yes]
#
# SRC is this repository (run-guest.sh runs a copy of this script).
# BLKTESTS is a blktests checkout built with make; the guest writes only
# to its own overlay, so the checkout stays as it is. NVMET_CFS_BIN is the
# nvmet-cfs shim, which nvme-target-control mounts over nvmet's configfs
# (else it is built here with go, which takes long under emulation).
# CHECK_TIMEOUT (default 1200 s) bounds blktests' run.
# DIR/blktests holds blktests' results, DIR/target.log the daemon's log,
# DIR/nvmet-cfs.log the shim's, DIR/dmesg.log the guest kernel's.
set -euo pipefail
: "${NVMEOF_TGT:?the nvmeof-tgt binary}" "${BLKTESTS:?a blktests checkout}" "${SRC:?this repository}"
tests=${TESTS:-nvme}
trtype=${NVMET_TRTYPES:-rdma}
case $trtype in
rdma | tcp) ;;
*) echo "NVMET_TRTYPES=$trtype: want rdma or tcp, one transport per run" >&2; exit 2 ;;
esac
# blktests checks kernel options in /boot/config-$(uname -r); the guest's
# kernel is unpacked beside its modules, and / is a writable overlay here.
c=${NVMEOF_TEST_CACHE:-/var/cache/nvmeof-tgt-test}/$(uname -r)/root/boot/config-$(uname -r)
if [ -f "$c" ]; then cp "$c" /boot/; fi
[ -f "/boot/config-$(uname -r)" ] || echo "no kernel config for $(uname -r): blktests will skip tests that check options"
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
# The shim, on PATH where nvme-target-control looks for it.
mkdir -p /tmp/bin
if [ -n "${NVMET_CFS_BIN:-}" ]; then
	ln -sf "$NVMET_CFS_BIN" /tmp/bin/nvmet-cfs
else
	(cd "$SRC" && GOCACHE=/tmp/gocache PATH=/usr/local/go/bin:$PATH \
		go build -o /tmp/bin/nvmet-cfs ./test/blktests/nvmet-cfs)
fi
export PATH=/tmp/bin:$PATH
modprobe fuse
# losetup loads loop through /dev/loop-control, a node the guest (no
# systemd, no static device nodes) has only once loop is loaded; nvme/051
# asks for a loop device without requiring the module as others do.
modprobe loop
if [ "$trtype" = tcp ]; then
	# Host and daemon share this kernel: the host's zero-copy sends reach
	# the daemon's read(2) as pages of the host's buffers, and hardened
	# usercopy refuses a copy that crosses transparent huge pages (a
	# kernel BUG on 6.1); see test/e2e/scenarios/24-tcp.sh.
	echo never >/sys/kernel/mm/transparent_hugepage/enabled
	modprobe nvme-tcp
fi
mkdir -p /data
if [ -b /dev/vda ]; then
	mkfs.ext4 -q -F /dev/vda
	mount /dev/vda /data
fi
# PORTS: how many ports the daemon has (1, 2, ...: service IDs 4420, 4421,
# ...), every one serving each test's subsystem.
{
	echo "ports:"
	for i in $(seq "${PORTS:-1}"); do
		echo "  - {id: $i, transport: $trtype, address: 10.99.0.1, port: $((4419 + i))}"
	done
	echo "subsystems: []"
} >/tmp/tgt.yaml
"$NVMEOF_TGT" -config /tmp/tgt.yaml >/results/target.log 2>&1 &
tgt=$!
# Up to 120 s: under emulation the daemon takes tens of seconds to
# listen, and each refused discover takes about a second.
deadline=$((SECONDS + 120))
# -s: over TCP, nvme discover's default is 8009, the well-known discovery
# port, which the daemon does not listen on here.
until nvme discover -t "$trtype" -a 10.99.0.1 -s 4420 >/dev/null 2>&1; do
	if ((SECONDS >= deadline)); then
		echo "the daemon does not answer discovery on 10.99.0.1:4420 ($trtype) after 120 s: see target.log" >&2
		break
	fi
	sleep 0.1
done
cd "$BLKTESTS"
rc=0
# USE_RXE: blktests' rdma set-up finds the guest's soft-RoCE link.
NVME_TARGET_CONTROL=$SRC/test/blktests/nvme-target-control NVMET_TRTYPES=$trtype NVMET_TRTYPE=$trtype \
	NVMET_BLKDEV_TYPES=file USE_RXE=1 \
	NVME_IMG_SIZE=64M NVMET_IMG_SIZE=64MiB NVMET_IMG_DIR=/data/bt NVMET_CFS_LOG=/results/nvmet-cfs.log \
	timeout "${CHECK_TIMEOUT:-1200}" ./check $tests || rc=$?
cp -r results /results/blktests
dmesg >/results/dmesg.log
kill "$tgt"
wait "$tgt" || true
exit "$rc"
