# Sourced by the soak tests: soak_run runs the e2e suite once, as they set
# it up (E2E_ONLY and the scenario's knobs, exported), and reports.

# soak_run NAME SECS WHAT ACCOUNT: run the suite with a go test timeout of
# SECS + 600 s, into the log test/soak/NAME-<date>.log (not kept in git);
# print WHAT, then the scenario's own account (its log lines that match
# the extended regular expression ACCOUNT after their indent and the
# seconds the guest stamps them with), then the
# suite's verdict. Exits with the suite's status.
soak_run() {
	export PATH=/usr/local/go/bin:$PATH
	local log rc=0
	log=$repo/test/soak/$1-$(date -u +%Y%m%dT%H%M%SZ).log
	echo "soak: $3; log $log"
	(cd "$repo" && go test -count=1 -tags e2e -v -timeout "$(($2 + 600))s" ./test/e2e/) >"$log" 2>&1 || rc=$?
	grep -E "^\s+([0-9]+\.[0-9] )?($4)" "$log" | sed -E 's/^\s*([0-9]+\.[0-9] )?//' || true
	grep -E '^(--- |ok|FAIL)' "$log" | tail -3
	exit "$rc"
}
