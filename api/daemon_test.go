package api

import (
	"io"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/sirupsen/logrus"
)

// validatingTarget stands in for the daemon: Apply validates and keeps
// the configuration, opening nothing, so hostile paths touch no file.
type validatingTarget struct {
	cfg    *config.Config
	gen    uint64
	target *fabrics.Target // empty: get_state lists what config and target share
	edits  sync.Mutex
	log    *logrus.Entry
}

func (v *validatingTarget) Running() *config.Config { return v.cfg.Clone() }
func (v *validatingTarget) Reload(string) error     { return nil }
func (v *validatingTarget) LockEdits() func() {
	v.edits.Lock()
	return v.edits.Unlock
}
func (v *validatingTarget) Generation() (uint64, bool, time.Time) {
	return v.gen, true, time.Time{}
}
func (v *validatingTarget) Apply(next *config.Config) error {
	if err := next.Validate(); err != nil {
		return err
	}
	v.cfg, v.gen = next.Clone(), v.gen+1
	return nil
}
func (v *validatingTarget) Target() *fabrics.Target { return v.target }
func (v *validatingTarget) Gateway() (string, string, []*gateway.Runner) {
	return "", "", nil
}

const (
	nqnA = "nqn.2026-11.io.example:a"
	nqnB = "nqn.2026-11.io.example:b"
)

// standIn is a validatingTarget with one port and the subsystems nqnA
// and nqnB, in its configuration and its target, which logs nothing.
func standIn(t testing.TB) *validatingTarget {
	t.Helper()
	cfg, err := config.Parse([]byte(`
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - {nqn: ` + nqnA + `, allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 64MiB}]}
  - {nqn: ` + nqnB + `, allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 64MiB}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	tg := fabrics.NewTarget(nil)
	for _, nqn := range []string{nqnA, nqnB} {
		tg.AddSubsystem(fabrics.NewSubsystem(nqn, "", "", false))
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	return &validatingTarget{cfg: cfg, target: tg, log: logrus.NewEntry(log)}
}

// An admin change holds the daemon's edit lock from reading the running
// configuration to applying its own, so that no reload or other change
// comes between (the daemon's tests show a reload holds it too).
func TestChangeHoldsTheEditLock(t *testing.T) {
	d := standIn(t)
	a := NewHandler(d, "", "test", d.log)
	if _, err := a.change(func(c *config.Config) (string, error) {
		if d.edits.TryLock() {
			d.edits.Unlock()
			t.Error("the edit lock is free during an admin change")
		}
		c.Subsystems[0].Hosts = append(c.Subsystems[0].Hosts, config.HostNQN("nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000aa"))
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	if d.gen != 1 {
		t.Fatalf("generation %d after the change, want 1", d.gen)
	}
}
