package daemon

import (
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/nvmeof-tgt/nvmeof-tgt/metrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/metrics/metricstest"
)

// recordingLeaseObject keeps the holder's record as the object's
// attribute does.
type recordingLeaseObject struct {
	fakeLeaseObject
	rec string
}

func (f *recordingLeaseObject) Holder() (string, error)  { return f.rec, nil }
func (f *recordingLeaseObject) SetHolder(v string) error { f.rec = v; return nil }

// A failback's handover survives the trip through the lease object, and
// a record from an older run, of three lines, reads as an owner with none.
func TestRadosStoreRecordsTheHandover(t *testing.T) {
	o := &recordingLeaseObject{}
	s := &radosStore{l: o}
	for _, h := range []gateway.Holder{{Handover: "gw-a"}, {Name: "gw-b", Cookie: "gw-b.1", Addr: "10.0.0.2:0/2"}, {}} {
		if err := s.Record(h); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Recorded(); got != h || err != nil {
			t.Fatalf("recorded %+v, read back %+v (%v)", h, got, err)
		}
	}
	o.rec = "gw-b\ngw-b.1\n10.0.0.2:0/2"
	if got, _ := s.Recorded(); got != (gateway.Holder{Name: "gw-b", Cookie: "gw-b.1", Addr: "10.0.0.2:0/2"}) {
		t.Fatalf("an older run's record read as %+v", got)
	}
}

// nvmeof_tgt_gateway_failbacks_total counts each group's failbacks.
func TestGatewayFailbacksMetric(t *testing.T) {
	gs := &gatewaySet{runners: []*gateway.Runner{{Lease: &gateway.Lease{Group: 3, Failbacks: 2}}}}
	runningGateway.Store(gs)
	defer runningGateway.CompareAndSwap(gs, nil)
	m := metricstest.Scrape(t, &metrics.Collector{Target: fabrics.NewTarget(nil), Generation: func() (uint64, bool, time.Time) { return 1, true, time.Now() },
		Gateways: gatewayStatuses}, "nvmeof_tgt_gateway_failbacks_total")
	if len(m) != 1 || m[0].Value != 2 || m[0].Labels["group"] != "3" {
		t.Fatalf("nvmeof_tgt_gateway_failbacks_total %+v, want 2 for group 3", m)
	}
}

func (f *fakeLeaseObject) Close() {}

// blocklistedWatch is a lease object whose watch broke because the
// client was blocklisted.
type blocklistedWatch struct{ fakeLeaseObject }

func (f *blocklistedWatch) WatchError() error { return syscall.ESHUTDOWN }

// A watch broken by a blocklist entry is the client fenced: the next
// lock call says so (the group steps down and its client is rebuilt)
// rather than set the watch up again on a fenced client.
func TestRadosStoreWatchBlocklisted(t *testing.T) {
	o := &blocklistedWatch{}
	s := &radosStore{l: o, watching: true}
	if err := s.Lock(true); !errors.Is(err, gateway.ErrBlocklisted) {
		t.Fatalf("renewal with the watch blocklisted: %v", err)
	}
	if o.unwatches != 1 {
		t.Fatalf("unwatches %d", o.unwatches)
	}
}

// A rebuild's new lease object replaces the old one in the store: the
// watch is set up on it, its address read again, and the standby
// announcements reopened on the new client.
func TestRadosStoreReplace(t *testing.T) {
	old, nl := &fakeLeaseObject{}, &fakeLeaseObject{}
	opened := 0
	s := &radosStore{l: old, standbyObject: func(string) (standbyObject, error) {
		opened++
		return &fakeStandbyObject{obj: &fakeAnnouncement{rec: "p-1"}}, nil
	}}
	if err := s.Lock(false); err != nil || old.watches != 1 {
		t.Fatalf("lock %v, watches %d", err, old.watches)
	}
	s.Self()
	s.Announced("p")
	s.replace(nl)
	if err := s.Lock(false); err != nil || nl.watches != 1 || old.watches != 1 {
		t.Fatalf("after the replace: lock %v, watches new %d old %d", err, nl.watches, old.watches)
	}
	if s.self != "" {
		t.Fatalf("the old client's address %q kept", s.self)
	}
	s.Announced("p")
	if opened != 2 {
		t.Fatalf("announcement opened %d times, want again on the new client", opened)
	}
}

// heldStandby is a standby announcement object locked by its gateway: a
// lock call of a peer finds it busy.
type heldStandby struct{ recordingLeaseObject }

func (h *heldStandby) Lock(bool) error { return syscall.EBUSY }

// A preferred gateway's announcement carries the digest of the namespaces
// it serves in the group, through the standby object, for the owner to
// compare; one namespace more in the group changes it.
func TestAnnouncementCarriesTheNamespaces(t *testing.T) {
	announcing := &recordingLeaseObject{}
	a := &radosStore{standbyObject: func(string) (standbyObject, error) { return announcing, nil }}
	names := []string{"nqn.2026-11.io.example:gw 1 5d1c8f3e2a474b6e9c013f2e4d5a6b7c"}
	me := gateway.Holder{Name: "gw-a", Cookie: "gw-a.1", Namespaces: namespacesDigest(names)}
	if err := a.Announce(me, time.Second); err != nil {
		t.Fatal(err)
	}
	owner := &radosStore{standbyObject: func(string) (standbyObject, error) {
		return &heldStandby{recordingLeaseObject{rec: announcing.rec}}, nil
	}}
	got, err := owner.Announced("gw-a")
	if err != nil || got != "gw-a.1 "+me.Namespaces {
		t.Fatalf("announced %q (%v), want the cookie and the digest %s", got, err, me.Namespaces)
	}
	more := namespacesDigest(append(names, "nqn.2026-11.io.example:gw 2 00000000000000000000000000000002"))
	if more == me.Namespaces || namespacesDigest(slices.Clone(names)) != me.Namespaces {
		t.Fatalf("digests: one namespace %s, two %s", me.Namespaces, more)
	}
}
