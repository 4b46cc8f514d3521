#!/bin/bash
# ceph-start.sh cluster|apart: in the guest, start the Ceph cluster
# (test/ceph/cluster.sh: one monitor, one BlueStore OSD, pool rbd of size
# 1, cephx on) in /ceph/cluster on the third disk; with apart, also its
# second OSD and pool apart on it alone (cluster.sh add-osd).
#
# guest-run.sh runs it in the background a few scenarios before the first
# that needs the cluster, so that the start (about 45 s of the emulated
# guest, and 30 more for the second OSD) overlaps scenarios that leave a
# CPU idle; lib.sh's ceph_up and ceph_apart_up wait for it, or run it
# themselves when nothing did. Its output goes to RESULTS/ceph-start.log;
# /run/e2e-ceph/cluster.rc and apart.rc hold the exit status of each part
# once it ends, and cluster.secs and apart.secs its time.
set -uo pipefail
st=/run/e2e-ceph
dir=/ceph/cluster
mkdir -p "$st"
# part NAME COMMAND...: run one part, its status and time in $st.
part() {
	local name=$1 start=${EPOCHREALTIME/./} rc=0
	shift
	"$@" || rc=$?
	echo $(((${EPOCHREALTIME/./} - start) / 1000000)) >"$st/$name.secs"
	echo "$rc" >"$st/$name.rc.new" && mv "$st/$name.rc.new" "$st/$name.rc"
	return "$rc"
}
cluster() {
	[ -b /dev/vdc ] || { echo "no /dev/vdc for the Ceph cluster (test/e2e/e2e_test.go makes it)"; return 1; }
	# The OSD puts the host name in its CRUSH location; BlueStore needs
	# O_DIRECT, which the guest's tmpfs lacks.
	hostname ceph0
	mkfs.ext4 -q -F /dev/vdc && mkdir -p /ceph && mount /dev/vdc /ceph &&
		CEPH_OSD_SIZE=$((2 << 30)) "$E2E_DIR/../ceph/cluster.sh" start "$dir"
}
exec >>"$RESULTS/ceph-start.log" 2>&1
case ${1:-} in
cluster) part cluster cluster ;;
apart)
	# (ceph_apart_up runs it after ceph_up, when the cluster is up.)
	[ -e "$st/cluster.rc" ] || part cluster cluster || exit 1
	read -r rc <"$st/cluster.rc" && [ "$rc" = 0 ] || exit 1
	part apart "$E2E_DIR/../ceph/cluster.sh" add-osd "$dir" apart
	;;
*) echo "usage: ceph-start.sh cluster|apart" >&2; exit 2 ;;
esac
