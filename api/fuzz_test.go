package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

var fuzzSeeds = []string{
	hello + "\n" + `{"jsonrpc":"2.0","id":1,"method":"get_state"}`,
	hello + "\n" + `{"jsonrpc":"2.0","id":1,"method":"add_port","params":{"id":2,"address":"10.0.0.2","port":4430}}`,
	hello + "\n" + `{"jsonrpc":"2.0","id":1,"method":"remove_port","params":{"id":1}}`,
	hello + "\n" + `{"jsonrpc":"2.0","id":2,"method":"add_subsystem","params":{"nqn":"blktests-subsystem-1","hosts":["h"],"ports":[1]}}`,
	hello + "\n" + `{"jsonrpc":"2.0","id":"x","method":"set_subsystem","params":{"nqn":"nqn.2026-11.io.example:a","allow_any_host":false}}`,
	hello + "\n" + `{"jsonrpc":"2.0","id":3,"method":"add_namespace","params":{"nqn":"nqn.2026-11.io.example:a","backend":"nullblk","size":"1GiB","block_size":4096}}`,
	hello + "\n" + `{"jsonrpc":"2.0","id":3,"method":"set_namespace","params":{"nqn":"nqn.2026-11.io.example:a","nsid":1,"size":1048576}}`,
	hello + "\n" + `{"jsonrpc":"2.0","id":4,"method":"remove_namespace","params":{"nqn":"nqn.2026-11.io.example:a","nsid":1}}`,
	hello + "\n" + `{"jsonrpc":"2.0","id":5,"method":"add_host","params":{"nqn":"nqn.2026-11.io.example:a","host":"h"}}` + "\n" +
		`{"jsonrpc":"2.0","id":6,"method":"remove_host","params":{"nqn":"nqn.2026-11.io.example:a","host":"h"}}`,
	hello + "\n" + `{"jsonrpc":"2.0","id":7,"method":"remove_subsystem","params":{"nqn":"nqn.2026-11.io.example:a"}}`,
	hello + "\n" + `{"jsonrpc":"2.0","id":8,"method":"save_config","params":{"path":"/x.yaml"}}` + "\n" + `{"jsonrpc":"2.0","id":9,"method":"reload"}`,
	hello + "\n" + `[{"jsonrpc":"2.0","id":1,"method":"get_state"}]`,
	hello + "\n" + `{"jsonrpc":"2.0","method":"get_state"}` + "\n" + `{"jsonrpc":"2.0","id":null,"method":"get_state","params":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"get_state"}`,
	`{"jsonrpc":"2.0","id":1,"method":"get_version","params":{"api_version":2}}`,
	hello + "\n{\"jsonrpc\":\"2.0\",\n",
	"\n\n \t\n" + hello,
}

var fuzzCodes = map[int]bool{
	CodeParseError: true, CodeInvalidRequest: true, CodeMethodNotFound: true, CodeInvalidParams: true,
	CodeHandshakeRequired: true, CodeVersionMismatch: true, CodeNotFound: true, CodeAlreadyExists: true,
	CodeValidationFailed: true, CodeNotApplied: true, CodeInUse: true,
}

// FuzzRPC feeds arbitrary bytes to one admin connection: every response
// is a JSON-RPC 2.0 response with one of the documented codes, there is
// at most one per line, and whatever was applied validates.
func FuzzRPC(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	base, err := config.Parse([]byte(`
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:a
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 64MiB}]
`))
	if err != nil {
		f.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	f.Fuzz(func(t *testing.T, input string) {
		m := &validatingTarget{cfg: base.Clone(), target: fabrics.NewTarget(nil)}
		a := NewHandler(m, "", "test", logrus.NewEntry(log))
		a.write = func(string, []byte) error { return nil }
		c := &memConn{in: strings.NewReader(input)}
		a.ServeConn(c)
		checkResponses(t, c.out.Bytes(), strings.Count(input, "\n")+1)
		if err := m.cfg.Validate(); err != nil {
			t.Fatalf("an accepted change left an invalid configuration: %v", err)
		}
	})
}

func checkResponses(t *testing.T, out []byte, maxLines int) {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		n++
		var keys map[string]json.RawMessage
		var r rawResponse
		if err := json.Unmarshal(sc.Bytes(), &keys); err != nil || json.Unmarshal(sc.Bytes(), &r) != nil {
			t.Fatalf("response %q: %v", sc.Text(), err)
		}
		_, hasID := keys["id"]
		_, hasResult := keys["result"]
		_, hasError := keys["error"]
		if r.JSONRPC != "2.0" || !hasID || hasResult == hasError || len(keys) != 3 {
			t.Fatalf("not a JSON-RPC 2.0 response: %s", sc.Text())
		}
		if r.Error != nil && !fuzzCodes[r.Error.Code] {
			t.Fatalf("undocumented error code: %s", sc.Text())
		}
	}
	if n > maxLines {
		t.Fatalf("%d responses to %d lines", n, maxLines)
	}
}
