package gateway

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// rebuilding gives g a rebuild that replaces its client by a new instance
// at addr+"/rebuilt.N" (a new global id: the blocklist entry does not name
// it), failing while fail says so. It returns the count of calls.
func rebuilding(g *gw, fail func() bool) *int {
	calls := new(int)
	g.rebuild = func() error {
		*calls++
		if fail != nil && fail() {
			return errors.New("connecting the new client: timed out")
		}
		old := g.client
		g.client = &fakeClient{c: old.c, addr: old.addr + "/rebuilt", cookie: old.cookie}
		g.store = nil
		return nil
	}
	return calls
}

// blocklist blocklists g's client from outside (an operator's `ceph osd
// blocklist add`) and steps the gateways without sim's check until g's
// next renewal finds it out: meanwhile g still takes itself for the
// owner, while the OSDs refuse its I/O (which, on a namespace, would step
// it down at once: TestFencedByIORebuilds).
func blocklist(t *testing.T, c *fakeCluster, g *gw, gws ...*gw) {
	t.Helper()
	c.blocklist[g.client.addr] = true
	for start := c.now; g.l.State() == Owner; c.now += 100 * time.Millisecond {
		if c.now-start > timing.Renew {
			t.Fatalf("%s still the owner %v after its blocklisting", g.name, c.now-start)
		}
		for _, o := range append([]*gw{g}, gws...) {
			o.step()
		}
	}
}

// The owner's client is blocklisted from outside: the peer takes the
// group over (fencing it), and the fenced gateway, instead of staying
// blocklisted, rebuilds its client and stands by again by itself; it
// takes the group again when the peer dies.
func TestBlocklistedGatewayRebuildsAndStandsBy(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	calls := rebuilding(a, nil)
	sim(t, c, time.Second, a, b)
	if owner(a, b) != "a" {
		t.Fatalf("owner %q", owner(a, b))
	}
	fencedAt := c.now
	blocklist(t, c, a, b)
	sim(t, c, timing.Lease+2*timing.Renew, a, b)
	if owner(a, b) != "b" || a.l.State() != Standby || a.l.Rebuilds != 1 || *calls != 1 {
		t.Fatalf("%v after the blocklist: owner %q, a %v, rebuilds %d (calls %d)", c.now-fencedAt, owner(a, b), a.l.State(), a.l.Rebuilds, *calls)
	}
	if a.l.LastErr != nil {
		t.Errorf("a standing by again with the error %v", a.l.LastErr)
	}
	sim(t, c, time.Minute, a, b)
	if owner(a, b) != "b" || a.l.State() != Standby || a.l.Rebuilds != 1 {
		t.Fatalf("a minute later: owner %q, a %v, rebuilds %d", owner(a, b), a.l.State(), a.l.Rebuilds)
	}
	b.paused = true
	sim(t, c, timing.Lease+2*timing.Renew, a, b)
	if owner(a) != "a" || a.l.Fencings != 1 {
		t.Fatalf("b dead: a %v, fencings %d", a.l.State(), a.l.Fencings)
	}
}

// A namespace's I/O finds the client blocklisted (Fenced) before any
// lease call does: the group steps down and the client is rebuilt all
// the same, once.
func TestFencedByIORebuilds(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	calls := rebuilding(a, nil)
	sim(t, c, time.Second, a, b)
	c.blocklist[a.client.addr] = true
	a.l.Fenced()
	if a.l.State() != Blocklisted {
		t.Fatalf("a fenced by an I/O: %v", a.l.State())
	}
	sim(t, c, timing.Lease+2*timing.Renew, a, b)
	if owner(a, b) != "b" || a.l.State() != Standby || *calls != 1 {
		t.Fatalf("owner %q, a %v, rebuild calls %d", owner(a, b), a.l.State(), *calls)
	}
}

// A rebuild that fails is tried again after a back-off that doubles from
// a renewal interval up to a minute, not at every step; the group stays
// blocklisted (the metric's state) meanwhile, and stands by once one
// succeeds.
func TestFailedRebuildBacksOff(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	failing := true
	var at []time.Duration
	calls := rebuilding(a, func() bool { at = append(at, c.now); return failing })
	sim(t, c, time.Second, a, b)
	blocklist(t, c, a, b)
	sim(t, c, 5*time.Minute, a, b)
	if a.l.State() != Blocklisted || owner(a, b) != "b" {
		t.Fatalf("a %v, owner %q while its rebuilds fail", a.l.State(), owner(a, b))
	}
	if *calls < 5 || *calls > 10 || a.l.RebuildFailures != uint64(*calls) {
		t.Fatalf("%d rebuilds in 5 minutes (failures %d): want a back-off", *calls, a.l.RebuildFailures)
	}
	want := timing.Renew
	for i := 1; i < len(at); i++ {
		if gap := at[i] - at[i-1]; gap < want || gap > want+200*time.Millisecond {
			t.Fatalf("rebuild %d came %v after the one before, want %v (all at %v)", i, gap, want, at)
		}
		want = min(2*want, maxRebuildBackoff)
	}
	failing = false
	sim(t, c, maxRebuildBackoff+time.Second, a, b)
	if a.l.State() != Standby || a.l.Rebuilds != 1 {
		t.Fatalf("after the cluster took the new client: a %v, rebuilds %d", a.l.State(), a.l.Rebuilds)
	}
}

// Two groups, each with its own client: blocklisting group 1's client
// steps group 1 down and rebuilds it, while group 2, owned by the same
// daemon, is not touched (no step down, no rebuild).
func TestOtherGroupUnaffectedByARebuild(t *testing.T) {
	c1, c2 := newCluster(timing.Lease), newCluster(timing.Lease)
	a1, b1 := newGW(c1, "a", "10.0.0.1:0/1"), newGW(c1, "b", "10.0.0.2:0/2")
	a2, b2 := newGW(c2, "a", "10.0.0.1:0/11"), newGW(c2, "b", "10.0.0.2:0/12")
	calls1, calls2 := rebuilding(a1, nil), rebuilding(a2, nil)
	both := func(d time.Duration) {
		for end := c1.now + d; c1.now < end; {
			sim(t, c1, 100*time.Millisecond, a1, b1)
			sim(t, c2, 100*time.Millisecond, a2, b2)
		}
	}
	both(time.Second)
	blocklist(t, c1, a1, b1)
	both(timing.Lease + 2*timing.Renew)
	if owner(a1, b1) != "b" || a1.l.State() != Standby || *calls1 != 1 {
		t.Fatalf("group 1: owner %q, a %v, rebuilds %d", owner(a1, b1), a1.l.State(), *calls1)
	}
	if owner(a2, b2) != "a" || a2.l.Takeovers != 1 || *calls2 != 0 {
		t.Fatalf("group 2: owner %q, a's takeovers %d, rebuilds %d", owner(a2, b2), a2.l.Takeovers, *calls2)
	}
}

// The runner: an I/O finds the client blocklisted (Fenced); the group is
// published inaccessible (blocklisted) before the rebuild starts, the
// rebuild runs once, and the group is published standby after it.
func TestRunnerRebuildsAfterFenced(t *testing.T) {
	var now atomic.Int64
	pub := make(chan State, 10)
	s := &recordingStore{calls: make(chan string, 10)}
	r := quietRunner(s, pub, &now)
	rebuilding := make(chan State, 1)
	rebuilt := make(chan error)
	r.Rebuild = func(uint32) error {
		rebuilding <- r.Status().State
		return <-rebuilt
	}
	defer run(r)()
	expectOwner(t, pub)
	r.Fenced()
	if st := <-pub; st != Blocklisted {
		t.Fatalf("published %v after Fenced", st)
	}
	if st := <-rebuilding; st != Blocklisted {
		t.Fatalf("rebuilding while %v", st)
	}
	rebuilt <- nil
	if st := <-pub; st != Standby {
		t.Fatalf("published %v after the rebuild", st)
	}
	if st := r.Status(); st.Rebuilds != 1 || st.RebuildFailures != 0 {
		t.Fatalf("status %+v", st)
	}
}

// A rebuilt gateway leaves the lease to the peer that is taking the
// group over: with the peer stopped too, it takes the group back only
// after a lease and an interval from its rebuild, not as soon as its old
// lock expired.
func TestRebuiltGatewayHoldsOff(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	rebuilding(a, nil)
	sim(t, c, time.Second, a, b)
	b.paused = true
	blocklist(t, c, a, b)
	for a.l.Rebuilds == 0 && c.now < time.Minute {
		sim(t, c, 100*time.Millisecond, a, b)
	}
	rebuilt := c.now
	for owner(a) == "" && c.now-rebuilt < time.Minute {
		sim(t, c, 100*time.Millisecond, a, b)
	}
	if took := c.now - rebuilt; owner(a) != "a" || took < timing.Holdoff+timing.Renew {
		t.Fatalf("a owner %q %v after its rebuild; want not before %v", owner(a), took, timing.Holdoff+timing.Renew)
	}
}

// The fence hook fires (an I/O found the client blocklisted) while an
// acquire is in flight: the acquire's success must not serve the group on
// the blocklisted client; it stays blocklisted, and is rebuilt.
func TestAcquireDoesNotOverrideFenced(t *testing.T) {
	l := &Lease{Group: 1, Timing: timing, Name: "a", Rebuild: true}
	if op, _ := l.Wake(0); op != OpAcquire {
		t.Fatalf("first op %v, want an acquire", op)
	}
	l.Fenced()
	l.Done(10*time.Millisecond, Result{Op: OpAcquire})
	if l.State() != Blocklisted || l.Takeovers != 0 {
		t.Fatalf("after an acquire that raced the fence hook: %v, takeovers %d", l.State(), l.Takeovers)
	}
	if op, _ := l.Wake(20 * time.Millisecond); op != OpRebuild {
		t.Fatalf("next op %v, want a rebuild", op)
	}
}
