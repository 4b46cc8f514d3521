# The rdma package's tests that need a real RDMA device (TestGuest*) run
# here, over the guest's soft-RoCE link: a developer's `go test ./rdma/`
# skips them, so this scenario is what keeps them from going unrun. They
# listen on ADDR (port 4430, apart from the daemon's) and connect with the
# raw host of test/rdmahost. The test binary is built by the suite
# (RDMA_TEST).
daemon_only "the rdma tests are nvmeof-tgt's"
[ -x "${RDMA_TEST:-}" ] || fail "RDMA_TEST='${RDMA_TEST:-}' is not an executable: test/e2e/e2e_test.go builds it"
wait_for 10 "an rxe GID for $ADDR" rxe_has_gid "$ADDR"
out=$RESULTS/$SCENARIO-go-test.txt
rc=0
(cd "$E2E_DIR/../../rdma" && NVMEOF_RDMA_TEST_ADDR=$ADDR "$RDMA_TEST" -test.v -test.count=1 -test.run '^TestGuest' -test.timeout 150s) >"$out" 2>&1 || rc=$?
grep -E -- "^(--- |ok|FAIL|PASS)" "$out" || true
[ "$rc" = 0 ] || fail "rdma guest tests failed (exit $rc): $(grep -B2 -A12 -- '--- FAIL' "$out" | head -60; tail -20 "$out")"
# Each of these must have run and passed; a skip here means the address
# did not reach them.
required=(TestGuestConnectIdentify TestGuestSRQEntriesSurviveTeardown TestGuestFloodPastQueueSize
	TestGuestQueuePairsGiveTheirThreadsBack TestGuestQoSWaitersLeaveTheSharedReceiveQueue
	TestGuestHostThatNeverTakesResponsesHoldsItsShare TestGuestPlaceRefusalIsCountedAsSuch)
for t in "${required[@]}"; do
	grep -q -- "^--- PASS: $t " "$out" || fail "$t did not run and pass in the guest: $(grep -A2 -- " $t" "$out" | head -5)"
	echo "ok: $t ran and passed"
done
# And none of the others skipped.
if grep -A1 -- "^--- SKIP: TestGuest" "$out"; then fail "a TestGuest test skipped with NVMEOF_RDMA_TEST_ADDR=$ADDR"; fi
echo "ok: $(grep -c -- '^--- PASS: TestGuest' "$out") TestGuest tests passed, none skipped"
