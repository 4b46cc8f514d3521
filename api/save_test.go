package api

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// save_config to a file refuses a configuration with inline DH-HMAC-CHAP
// secrets, which it would write redacted, a file -check refuses: a saved
// file always starts the daemon. Without a path, the YAML comes back
// redacted, with a note.
func TestSaveRefusesAFileWithRedactedSecrets(t *testing.T) {
	d := standIn(t)
	d.cfg.Subsystems[0].AllowAnyHost = false
	d.cfg.Subsystems[0].Hosts = []config.Host{{NQN: "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000aa",
		DHCHAPKey: "DHHC-1:01:ICcuNTxDSlFYX2ZtdHuCiZCXnqWss7rByM/W3eTr8vmMpzdS:"}}
	if err := d.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := NewHandler(d, "", "test", d.log)
	written := 0
	a.write = func(string, []byte) error { written++; return nil }
	path := filepath.Join(t.TempDir(), "saved.yaml")
	rs := exchange(t, a, lines(hello, `{"jsonrpc":"2.0","id":1,"method":"save_config","params":{"path":"`+path+`"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"save_config"}`))
	if len(rs) != 3 {
		t.Fatalf("%d responses, want 3: %+v", len(rs), rs)
	}
	if e := rs[1].Error; e == nil || e.Code != CodeNotApplied || e.Data.Field != "path" || !strings.Contains(e.Message, "dhchap_key_file") {
		t.Fatalf("save_config to a file with an inline secret: %+v", rs[1])
	}
	if written != 0 {
		t.Fatalf("the refused save wrote %d files", written)
	}
	var r SaveResult
	if err := json.Unmarshal(rs[2].Result, &r); err != nil || rs[2].Error != nil || r.Redacted != 1 || !strings.Contains(r.YAML, config.Redacted) {
		t.Fatalf("save_config without a path: %+v %+v %v", rs[2], r, err)
	}
}

// With a shared configuration, save_config leaves the subsystems out:
// the gateway group keeps them; the file keeps the daemon's own settings.
// Their inline secrets are not redacted into it either.
func TestSaveLeavesTheSharedSubsystemsOut(t *testing.T) {
	d := standIn(t)
	d.cfg.Gateway = &config.Gateway{Name: "gw-a", Pool: "rbd", LeasePrefix: "p", SharedConfig: true, CntlidMin: 1, CntlidMax: 99}
	d.cfg.Subsystems[0].Hosts = []config.Host{{NQN: "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000aa",
		DHCHAPKey: "DHHC-1:01:ICcuNTxDSlFYX2ZtdHuCiZCXnqWss7rByM/W3eTr8vmMpzdS:"}}
	a := NewHandler(d, "", "test", d.log)
	written := ""
	a.write = func(_ string, b []byte) error { written = string(b); return nil }
	path := filepath.Join(t.TempDir(), "saved.yaml")
	rs := exchange(t, a, lines(hello, `{"jsonrpc":"2.0","id":1,"method":"save_config","params":{"path":"`+path+`"}}`))
	var r SaveResult
	if err := json.Unmarshal(rs[1].Result, &r); err != nil || rs[1].Error != nil {
		t.Fatalf("save_config: %+v %v", rs[1], err)
	}
	if strings.Contains(written, d.cfg.Subsystems[0].NQN) || !strings.Contains(written, "shared_config: true") || !strings.Contains(r.Note, "p.config") {
		t.Fatalf("saved:\n%s\nnote %q", written, r.Note)
	}
}
