package main

import (
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// FuzzEdit feeds arbitrary ctl arguments to the command decoder: it may
// refuse them, never panic, and what it accepts is a configuration the
// validator can judge.
func FuzzEdit(f *testing.F) {
	for _, s := range []string{
		"add port -id 2 -address 10.0.0.2 -port 4430",
		"add subsystem blktests-subsystem-1 -port 2 -host nqn.2014-08.org.nvmexpress:uuid:x",
		"add namespace nqn.2026-11.io.example:a -backend nullblk -size 1GiB -block-size 4096",
		"add namespace nqn.2026-11.io.example:a -nsid 4294967295 -backend file -path /x -size 1",
		"remove namespace nqn.2026-11.io.example:a 1",
		"set namespace nqn.2026-11.io.example:a 1 -size 2GiB",
		"set subsystem nqn.2026-11.io.example:a -allow-any-host=false",
		"add host nqn.2026-11.io.example:a h",
		"remove host nqn.2026-11.io.example:a h",
		"remove port 1",
		"remove subsystem nqn.2026-11.io.example:a",
		"add port -id 70000",
		"add namespace x -size -5",
		"add",
	} {
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
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if len(args) < 2 {
			return
		}
		c := base.Clone()
		if err := edit(c, args[0], args[1], args[2:]); err != nil {
			return
		}
		c.Validate()
	})
}
