package daemon

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
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

// fakeStandbyObject is one gateway's announcement object as one client
// sees it: the lock is held by the cookie in holder until it lapses.
type fakeStandbyObject struct {
	obj    *fakeAnnouncement
	cookie string
	closed bool
}

type fakeAnnouncement struct {
	holder, rec string
	unlocks     int
}

func (f *fakeStandbyObject) Lock(bool) error {
	if f.obj.holder != "" && f.obj.holder != f.cookie {
		return syscall.EBUSY
	}
	f.obj.holder = f.cookie
	return nil
}

func (f *fakeStandbyObject) Unlock() error {
	if f.obj.holder == f.cookie {
		f.obj.holder = ""
		f.obj.unlocks++
	}
	return nil
}

func (f *fakeStandbyObject) Holder() (string, error) { return f.obj.rec, nil }

func (f *fakeStandbyObject) SetHolder(v string) error {
	if f.obj.holder != f.cookie {
		return syscall.EBUSY
	}
	f.obj.rec = v
	return nil
}

func (f *fakeStandbyObject) Close() { f.closed = true }

// The preferred gateway's announcement, read by the owner: its run while
// it holds the lock, none once the lock lapsed (the owner's probe gives
// the lock back) or before it ever announced.
func TestRadosStoreStandbyAnnouncements(t *testing.T) {
	objs := map[string]*fakeAnnouncement{}
	var opened []*fakeStandbyObject
	store := func(cookie string) *radosStore {
		return &radosStore{l: &fakeLeaseObject{}, poke: func() {}, standbyObject: func(name string) (standbyObject, error) {
			if objs[name] == nil {
				objs[name] = &fakeAnnouncement{}
			}
			o := &fakeStandbyObject{obj: objs[name], cookie: cookie}
			opened = append(opened, o)
			return o, nil
		}}
	}
	pref, owner := store("a.1"), store("b.2")
	if c, err := owner.Announced("a"); c != "" || err != nil {
		t.Fatalf("before any announcement: %q, %v", c, err)
	}
	if err := pref.Announce(gateway.Holder{Name: "a", Cookie: "a.1"}, time.Second); err != nil {
		t.Fatal(err)
	}
	if c, err := owner.Announced("a"); c != "a.1" || err != nil {
		t.Fatalf("announced: %q, %v", c, err)
	}
	objs["a"].holder = "" // the lock lapsed: a stopped announcing
	if c, err := owner.Announced("a"); c != "" || err != nil || objs["a"].holder != "" || objs["a"].unlocks != 1 {
		t.Fatalf("lapsed: %q, %v, lock held by %q after %d unlocks", c, err, objs["a"].holder, objs["a"].unlocks)
	}
	if len(opened) != 2 {
		t.Errorf("%d announcement objects opened, want one per store and name", len(opened))
	}
	owner.closeStandbys()
	pref.closeStandbys()
	for _, o := range opened {
		if !o.closed {
			t.Error("an announcement object was not closed")
		}
	}
}
