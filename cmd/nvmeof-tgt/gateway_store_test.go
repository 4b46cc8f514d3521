package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// fakeLeaseObject grants every lock; its watch breaks when told.
type fakeLeaseObject struct {
	watches, unwatches int
	broken             bool
}

func (f *fakeLeaseObject) Lock(bool) error         { return nil }
func (f *fakeLeaseObject) Unlock() error           { return nil }
func (f *fakeLeaseObject) Holder() (string, error) { return "", nil }
func (f *fakeLeaseObject) SetHolder(string) error  { return nil }
func (f *fakeLeaseObject) Self() (string, error)   { return "10.0.0.1:0/1", nil }
func (f *fakeLeaseObject) Fence(string) error      { return nil }
func (f *fakeLeaseObject) Notify() error           { return nil }
func (f *fakeLeaseObject) Watch(func()) error      { f.watches++; f.broken = false; return nil }
func (f *fakeLeaseObject) Unwatch()                { f.unwatches++ }
func (f *fakeLeaseObject) WatchError() error {
	if f.broken {
		return syscall.ENOTCONN
	}
	return nil
}

// A watch that broke (its OSD connection lost) is set up again at the
// next lock call, so that a peer's release still reaches this gateway at
// once.
func TestRadosStoreRearmsABrokenWatch(t *testing.T) {
	f := &fakeLeaseObject{}
	s := &radosStore{l: f, poke: func() {}}
	for range 3 {
		if err := s.Lock(true); err != nil {
			t.Fatal(err)
		}
	}
	if f.watches != 1 || f.unwatches != 0 {
		t.Fatalf("healthy watch: %d watches, %d unwatches", f.watches, f.unwatches)
	}
	f.broken = true
	if err := s.Lock(true); err != nil {
		t.Fatal(err)
	}
	if f.watches != 2 || f.unwatches != 1 {
		t.Fatalf("after the watch broke: %d watches, %d unwatches, want 2 and 1", f.watches, f.unwatches)
	}
}

const regroupYAML = `
ceph: {conf: /etc/ceph/ceph.conf, user: nvmeof, keyring: /etc/ceph/nvmeof.keyring}
gateway: {name: a, pool: rbd, groups: [1, 2]}
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:rbd
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: rbd, pool: rbd, image: vol1, ana_group: 1}
      - {nsid: 2, backend: nullblk, size: 1MiB, ana_group: 3}
`

// A namespace moves into or out of a gateway group only by removal and
// addition, never in place (set_namespace -ana-group, a reload): the
// change is refused before anything runs, naming the field. Other
// namespaces still move in place.
func TestGatewayGroupNamespaceDoesNotMoveLive(t *testing.T) {
	cur := parse(t, regroupYAML)
	for _, tc := range []struct{ from, to, want string }{
		{"image: vol1, ana_group: 1", "image: vol1, ana_group: 2", "subsystems[0].namespaces[0].ana_group: the namespace cannot move from ANA group 1 to 2"},
		{"size: 1MiB, ana_group: 3", "size: 1MiB, ana_group: 1", "subsystems[0].namespaces[1].ana_group: the namespace cannot move from ANA group 3 to 1"},
		{"size: 1MiB, ana_group: 3", "size: 1MiB, ana_group: 4", ""},
	} {
		y := strings.Replace(regroupYAML, tc.from, tc.to, 1)
		next, err := config.Parse([]byte(y))
		if err != nil {
			if tc.want != "" && strings.Contains(err.Error(), "gateway group") {
				continue // refused by validation already
			}
			t.Fatal(err)
		}
		c := &change{cur: cur, next: next, plan: config.Diff(cur, next)}
		if len(c.plan.Regroup) != 1 {
			t.Fatalf("%s: plan %+v, want one namespace moved in place", tc.to, c.plan)
		}
		err = c.checkRegroup()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.to, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.to, err, tc.want)
		}
	}
}
