# -check accepts a good file and rejects a bad one naming the field path;
# -version prints the version.
daemon_only "nvmeof-tgt command-line flags"
cat >/tmp/good.yaml <<CFG
ports: [{id: 1, address: $ADDR}]
subsystems:
  - {nqn: nqn.2026-11.io.example:a, allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]}
CFG
"$NVMEOF_TGT" -check -config /tmp/good.yaml || fail "-check rejected a valid file"
sed 's/nullblk/flie/' /tmp/good.yaml >/tmp/bad.yaml
rc=0
out=$("$NVMEOF_TGT" -check -config /tmp/bad.yaml 2>&1) || rc=$?
assert_eq "-check exit status on a bad file" "$rc" 1
echo "$out" | grep -q 'subsystems\[0\].namespaces\[0\].backend: unknown backend "flie"' || fail "-check output lacks the field path: $out"
"$NVMEOF_TGT" -version | grep -q '^nvmeof-tgt ' || fail "-version"
