# The backend package's tests that need root and loop devices run here, in
# the guest, where both are at hand: a developer's `go test ./...` without
# root skips them, so this scenario is what keeps them from going unrun.
# The test binary is built by the suite (BACKEND_TEST); its temporary
# files go to the ext4 disk, so the O_DIRECT tests run on a file system
# that takes it.
daemon_only "the backend tests are nvmeof-tgt's"
[ -x "${BACKEND_TEST:-}" ] || fail "BACKEND_TEST='${BACKEND_TEST:-}' is not an executable: test/e2e/e2e_test.go builds it"
modprobe loop || fail "loading the loop driver"
[ -e /dev/loop-control ] || fail "no /dev/loop-control after loading the loop driver"
mkdir -p /data/gotmp
out=$RESULTS/$SCENARIO-go-test.txt
rc=0
# The tests against a Ceph cluster (RBD images, RADOS leases) run on the
# machine that runs the suite (go test ./... as root, with ceph required);
# here they would only start a second cluster.
(cd "$E2E_DIR/../../backend" && TMPDIR=/data/gotmp "$BACKEND_TEST" -test.v -test.count=1 -test.skip '^(TestRBD|TestRados)') >"$out" 2>&1 || rc=$?
grep -E -- "^(--- |ok|FAIL|PASS)" "$out" || true
[ "$rc" = 0 ] || fail "backend tests failed (exit $rc): $(grep -B2 -A8 -- '--- FAIL' "$out" | head -60)"
# The tests a non-root run skips must have run and passed here.
for t in TestBlock TestBlockReadOnly; do
	grep -q -- "^--- PASS: $t " "$out" || fail "$t did not run and pass in the guest: $(grep -A2 -- " $t " "$out" | head -5)"
	echo "ok: $t ran and passed"
done
# None of the Ceph tests ran: the guest's host name, "(none)" until a
# scenario starts its cluster, is no CRUSH location, and the OSD refuses it.
if grep -E -- "^=== RUN   (TestRBD|TestRados)" "$out"; then fail "a Ceph test ran in the guest"; fi
echo "ok: no Ceph test ran in the guest (host name: $(hostname))"
# Skips left are variants of one check for file systems that do or do not
# take O_DIRECT; listed with their reasons for the record.
grep -A1 -- "--- SKIP" "$out" || echo "no test skipped"
