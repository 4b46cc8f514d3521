package gateway

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

const failback = 15 * time.Second

// preferring makes a the preferred gateway of the group for every one of
// gws, with the failback delay, and has their notifications reach each
// other through the lease object.
func preferring(c *fakeCluster, a string, gws ...*gw) {
	for _, g := range gws {
		g.l.Preferred, g.l.Failback = a, failback
		g.store = notifyingClient{g.client}
		c.watchers = append(c.watchers, g.l)
	}
}

// failOver kills the owner a and runs until one of the others owns the
// group; it returns that one.
func failOver(t *testing.T, c *fakeCluster, a *gw, gws ...*gw) *gw {
	t.Helper()
	a.paused = true
	killed := c.now
	for c.now-killed <= timing.Lease+timing.Renew {
		sim(t, c, 100*time.Millisecond, append([]*gw{a}, gws...)...)
		for _, g := range gws {
			if g.l.State() == Owner {
				return g
			}
		}
	}
	t.Fatalf("no takeover %v after the kill", c.now-killed)
	return nil
}

// failedOverFromPreferred is a pair that prefers a, after a's death made
// b the owner.
func failedOverFromPreferred(t *testing.T) (c *fakeCluster, a, b *gw) {
	t.Helper()
	c = newCluster(timing.Lease)
	a, b = newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	preferring(c, "a", a, b)
	sim(t, c, time.Second, a, b)
	failOver(t, c, a, b)
	return c, a, b
}

// restart is g's daemon started again: a new client and cookie, the same
// name and settings.
func restart(c *fakeCluster, g *gw, addr string) *gw {
	g.paused = true
	n := newGW(c, g.name, addr)
	preferring(c, g.l.Preferred, n)
	return n
}

// The preferred gateway restarts after a failover and stands by: the
// survivor hands the group back after the failback delay, not before,
// by a planned release (no fencing), and it stays there.
func TestFailbackAfterTheDelay(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	preferring(c, "a", a, b)
	sim(t, c, time.Second, a, b)
	if owner(a, b) != "a" {
		t.Fatalf("owner %q", owner(a, b))
	}
	failOver(t, c, a, b)
	a2 := restart(c, a, "10.0.0.1:0/3")
	back := c.now
	// a2's first try finds the lease held and announces itself; the
	// count starts at b's next renewal after that.
	sim(t, c, failback, a2, b)
	if owner(a2, b) != "b" || b.l.Failbacks != 0 {
		t.Fatalf("%v after the restart, before the delay: owner %q, failbacks %d", c.now-back, owner(a2, b), b.l.Failbacks)
	}
	sim(t, c, 2*timing.Renew, a2, b)
	if owner(a2, b) != "a" || b.l.Failbacks != 1 || a2.l.Takeovers != 1 {
		t.Fatalf("%v after the restart: owner %q, failbacks %d, a2's takeovers %d", c.now-back, owner(a2, b), b.l.Failbacks, a2.l.Takeovers)
	}
	if a2.l.Fencings != 0 || len(c.blocklist) != 1 {
		t.Errorf("the failback fenced: a2's fencings %d, blocklist %v", a2.l.Fencings, c.blocklist)
	}
	sim(t, c, time.Minute, a2, b)
	if owner(a2, b) != "a" || a2.l.Takeovers != 1 || b.l.Takeovers != 1 {
		t.Fatalf("a minute later: owner %q, takeovers %d/%d", owner(a2, b), a2.l.Takeovers, b.l.Takeovers)
	}
}

// A preferred gateway that is up but not ready, stopped or cut off from
// the cluster, does not get the group: it does not announce itself.
func TestNoFailbackWhileThePreferredIsNotStandingBy(t *testing.T) {
	for _, tc := range []struct {
		name string
		not  func(*gw)
	}{
		{"stopped", func(g *gw) { g.paused = true }},
		{"partitioned", func(g *gw) { g.client.unreachable = true }},
		{"blocklisted", func(g *gw) { g.client.c.blocklist[g.client.addr] = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, a, b := failedOverFromPreferred(t)
			a2 := restart(c, a, "10.0.0.1:0/3")
			// Up and standing by for half the delay, then not ready.
			sim(t, c, failback/2, a2, b)
			tc.not(a2)
			sim(t, c, 2*time.Minute, a2, b)
			if owner(a2, b) != "b" || b.l.Failbacks != 0 || b.l.Takeovers != 1 {
				t.Fatalf("owner %q, failbacks %d, b's takeovers %d", owner(a2, b), b.l.Failbacks, b.l.Takeovers)
			}
		})
	}
}

// A preferred gateway that restarts every few seconds, each run standing
// by at once, never pulls the group over: each run is a new count. Once
// a run stays up, the group goes back, once.
func TestNoFlappingUnderARestartingPreferred(t *testing.T) {
	c, a, b := failedOverFromPreferred(t)
	run := a
	for i := range 30 { // two minutes
		run = restart(c, run, "10.0.0.1:0/"+string(rune('a'+i)))
		sim(t, c, 4*time.Second, run, b)
		if owner(run, b) != "b" || b.l.Failbacks != 0 {
			t.Fatalf("restart %d: owner %q, failbacks %d", i, owner(run, b), b.l.Failbacks)
		}
	}
	sim(t, c, failback+2*timing.Renew, run, b)
	if owner(run, b) != "a" || b.l.Failbacks != 1 || b.l.Takeovers != 1 || run.l.Takeovers != 1 {
		t.Fatalf("once up: owner %q, failbacks %d, takeovers %d/%d", owner(run, b), b.l.Failbacks, b.l.Takeovers, run.l.Takeovers)
	}
	if len(c.blocklist) != 1 {
		t.Errorf("blocklist %v: only the first owner's client was fenced", c.blocklist)
	}
}

// The owner that is itself the preferred gateway, or a group without
// one, never releases on its own.
func TestNoFailbackWithoutAnotherPreferred(t *testing.T) {
	for _, pref := range []string{"a", ""} {
		c := newCluster(timing.Lease)
		a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
		preferring(c, pref, a, b)
		sim(t, c, 2*time.Minute, a, b)
		if owner(a, b) != "a" || a.l.Failbacks != 0 || a.l.Takeovers != 1 {
			t.Fatalf("preferred %q: owner %q, failbacks %d, takeovers %d", pref, owner(a, b), a.l.Failbacks, a.l.Takeovers)
		}
	}
}

// Three gateways: the owner dies, the two survivors race for the lease in
// the same step. Exactly one takes it and fences the dead owner, once;
// the other stands by; nothing moves afterwards.
func TestThreeGatewaysSurvivorsRace(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b, d := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2"), newGW(c, "d", "10.0.0.3:0/3")
	sim(t, c, time.Second, a, b, d)
	if owner(a, b, d) != "a" {
		t.Fatalf("owner %q", owner(a, b, d))
	}
	// Both survivors' tries fall due at the same step once the lock
	// expires: line their intervals up.
	sim(t, c, timing.Renew, a, b, d)
	b.l.Poke()
	d.l.Poke()
	surv := failOver(t, c, a, b, d)
	other := b
	if surv == b {
		other = d
	}
	if other.l.State() != Standby || other.l.Takeovers != 0 {
		t.Fatalf("%s took over; %s is %v with %d takeovers", surv.name, other.name, other.l.State(), other.l.Takeovers)
	}
	if c.fences[a.client.addr] != 1 || len(c.fences) != 1 || b.l.Fencings+d.l.Fencings != 1 {
		t.Fatalf("fencings: calls %v, counted %d+%d", c.fences, b.l.Fencings, d.l.Fencings)
	}
	sim(t, c, 2*time.Minute, a, b, d)
	if owner(b, d) != surv.name || b.l.Takeovers+d.l.Takeovers != 1 {
		t.Fatalf("two minutes later: owner %q, takeovers %d+%d", owner(b, d), b.l.Takeovers, d.l.Takeovers)
	}
}

// Three gateways with a preferred one: it fails over to either survivor
// and back to it once it has stood by for the delay, and the third
// gateway, notified of the release too, does not take it on the way.
func TestThreeGatewaysFailback(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b, d := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2"), newGW(c, "d", "10.0.0.3:0/3")
	preferring(c, "a", a, b, d)
	// d starts later: its tries do not fall in the step of b's renewals.
	// (In the same step, a try of the third gateway may come between the
	// release and the preferred gateway's acquire and win; the group then
	// fails back from there after another delay.)
	sim(t, c, 1200*time.Millisecond, a, b)
	sim(t, c, time.Second, a, b, d)
	surv := failOver(t, c, a, b, d)
	other := b
	if surv == b {
		other = d
	}
	a2 := restart(c, a, "10.0.0.1:0/4")
	// The third gateway steps right after the owner in every round, ahead
	// of a2: were it poked by the failback's notification it would win
	// the lease.
	sim(t, c, failback+2*timing.Renew, surv, other, a2)
	if owner(a2, b, d) != "a" || surv.l.Failbacks != 1 {
		t.Fatalf("owner %q, failbacks of %s %d", owner(a2, b, d), surv.name, surv.l.Failbacks)
	}
	if b.l.Takeovers+d.l.Takeovers != 1 || a2.l.Takeovers != 1 || len(c.fences) != 1 {
		t.Fatalf("takeovers b %d d %d a2 %d, fences %v", b.l.Takeovers, d.l.Takeovers, a2.l.Takeovers, c.fences)
	}
	sim(t, c, 2*time.Minute, surv, other, a2)
	if owner(a2, b, d) != "a" || a2.l.Takeovers != 1 {
		t.Fatalf("two minutes later: owner %q, a2's takeovers %d", owner(a2, b, d), a2.l.Takeovers)
	}
}

// Three gateways started together: the third one's tries fall in the
// steps of the survivor's renewals, so it tries right after the
// failback's release, ahead of the preferred gateway. The handover the
// release records leaves the lease to the preferred one.
func TestThreeGatewaysFailbackGoesToThePreferredOnly(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b, d := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2"), newGW(c, "d", "10.0.0.3:0/3")
	preferring(c, "a", a, b, d)
	sim(t, c, time.Second, a, b, d)
	if surv := failOver(t, c, a, b, d); surv != b {
		t.Fatalf("%s took over, want b (it steps first)", surv.name)
	}
	a2 := restart(c, a, "10.0.0.1:0/4")
	sim(t, c, failback+2*timing.Renew, b, d, a2)
	if owner(a2, b, d) != "a" || b.l.Failbacks != 1 || d.l.Takeovers != 0 {
		t.Fatalf("owner %q, b's failbacks %d, d's takeovers %d", owner(a2, b, d), b.l.Failbacks, d.l.Takeovers)
	}
	if d.l.LastErr != nil {
		t.Errorf("d's last error %v: leaving the lease to a handover is not an error", d.l.LastErr)
	}
	sim(t, c, time.Minute, b, d, a2)
	if owner(a2, b, d) != "a" || a2.l.Takeovers != 1 || len(c.fences) != 1 {
		t.Fatalf("a minute later: owner %q, a2's takeovers %d, fences %v", owner(a2, b, d), a2.l.Takeovers, c.fences)
	}
}

// The preferred gateway dies between its announcement and the handover:
// the others leave it the lease only for the handover's bound, then one
// of them takes the group again, without fencing anyone.
func TestHandoverLapsesWithoutThePreferred(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b, d := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2"), newGW(c, "d", "10.0.0.3:0/3")
	preferring(c, "a", a, b, d)
	sim(t, c, time.Second, a, b, d)
	failOver(t, c, a, b, d)
	a2 := restart(c, a, "10.0.0.1:0/4")
	// a2 hears no notification: it would take the lease only at its own
	// interval, and it dies in the step of the release.
	c.watchers = []*Lease{b.l, d.l}
	for b.l.Failbacks == 0 && c.now < failback+time.Minute {
		sim(t, c, 100*time.Millisecond, a2, b, d)
	}
	a2.paused = true
	if b.l.Failbacks != 1 || owner(a2, b, d) != "" {
		t.Fatalf("no failback: failbacks %d, owner %q", b.l.Failbacks, owner(a2, b, d))
	}
	released := c.now
	for owner(b, d) == "" && c.now-released < timing.Lease {
		sim(t, c, 100*time.Millisecond, b, d)
	}
	if waited := c.now - released; owner(b, d) == "" || waited < b.l.handoverWait() || waited > b.l.handoverWait()+2*timing.Renew {
		t.Fatalf("owner %q %v after the release; the handover's bound is %v", owner(b, d), waited, b.l.handoverWait())
	}
	if len(c.fences) != 1 {
		t.Errorf("fences %v: the handover's lease had no holder to fence", c.fences)
	}
}

// unsettledOwner's failback stops short before it touches the lease, as
// the group's quiesce does when a write of the group timed out in the
// cluster and may still land (fabrics.ErrUnsettledWrites).
type unsettledOwner struct{ notifyingClient }

func (u unsettledOwner) Record(h Holder) error {
	if h.Handover != "" {
		return errors.New("subsystem nqn.x namespace 1: writes timed out in the cluster and may still land")
	}
	return u.notifyingClient.Record(h)
}

// A failback that stops short leaves the lock to expire and does not take
// it straight back: the preferred gateway takes the group once the lock
// has expired, fencing the old owner, whose late write cannot land after.
func TestFailbackStoppedShortFencesTheOldOwner(t *testing.T) {
	c, a, b := failedOverFromPreferred(t)
	b.store = unsettledOwner{notifyingClient{b.client}}
	a2 := restart(c, a, "10.0.0.1:0/3")
	sim(t, c, failback+2*timing.Renew+timing.Lease+2*timing.Renew, a2, b)
	if owner(a2, b) != "a" || b.l.Failbacks != 0 || b.l.Takeovers != 1 {
		t.Fatalf("owner %q, b's failbacks %d, b's takeovers %d", owner(a2, b), b.l.Failbacks, b.l.Takeovers)
	}
	if a2.l.Fencings != 1 || !c.blocklist[b.client.addr] {
		t.Fatalf("the old owner not fenced: a2's fencings %d, blocklist %v", a2.l.Fencings, c.blocklist)
	}
}

// A preferred gateway whose takeover could not make the group ready
// announces itself again only after a back-off that doubles, from the
// failback delay up to ten minutes, so that it is not given the group,
// fenced and rebuilt round after round; a takeover that serves ends it.
func TestNotReadyPreferredBacksOffAnnouncing(t *testing.T) {
	l := &Lease{Group: 1, Timing: timing, Name: "a", Preferred: "a", Failback: failback}
	if !l.Announces(0) {
		t.Fatal("a preferred gateway does not announce itself")
	}
	notReady := fmt.Errorf("%w: reservation state unreadable", ErrNotReady)
	var waits []time.Duration
	for now := time.Duration(0); len(waits) < 8; {
		l.Done(now, Result{Op: OpAcquire, Started: now, Err: notReady})
		wait := l.announce.due - now
		if l.Announces(now+wait-time.Millisecond) || !l.Announces(now+wait) {
			t.Fatalf("announces around %v after a failed takeover", wait)
		}
		waits = append(waits, wait)
		now += wait
	}
	want := []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	if !slices.Equal(waits, want) {
		t.Fatalf("back-offs %v, want %v", waits, want)
	}
	now := 2 * time.Hour
	l.Done(now, Result{Op: OpAcquire, Started: now})
	l.Done(now+time.Second, Result{Op: OpAcquire, Started: now + time.Second, Err: notReady})
	if wait := l.announce.due - now - time.Second; wait != failback {
		t.Fatalf("back-off %v after a takeover that served, want %v again", wait, failback)
	}
}

// A preferred gateway that serves other namespaces in the group than the
// owner (a namespace added through the owner alone) does not get the
// group back: the namespace would vanish for the hosts. Once it serves
// the same, the failback follows the delay as usual.
func TestNoFailbackToAPreferredWithOtherNamespaces(t *testing.T) {
	c, a, b := failedOverFromPreferred(t)
	b.namespaces = "with-ns-2"
	a2 := restart(c, a, "10.0.0.1:0/3")
	a2.namespaces = "ns-1-only"
	sim(t, c, 2*time.Minute, a2, b)
	if owner(a2, b) != "b" || b.l.Failbacks != 0 {
		t.Fatalf("namespaces differ: owner %q, failbacks %d", owner(a2, b), b.l.Failbacks)
	}
	a2.namespaces = b.namespaces
	sim(t, c, failback+2*timing.Renew, a2, b)
	if owner(a2, b) != "a" || b.l.Failbacks != 1 {
		t.Fatalf("namespaces the same: owner %q, failbacks %d", owner(a2, b), b.l.Failbacks)
	}
}

// An announcement without a digest (a gateway of an earlier release,
// during a rolling upgrade) is taken as before: the failback proceeds.
func TestFailbackToAnAnnouncementWithoutNamespaces(t *testing.T) {
	c, a, b := failedOverFromPreferred(t)
	b.namespaces = "with-ns-2"
	a2 := restart(c, a, "10.0.0.1:0/3")
	sim(t, c, failback+2*timing.Renew, a2, b)
	if owner(a2, b) != "a" || b.l.Failbacks != 1 {
		t.Fatalf("owner %q, failbacks %d", owner(a2, b), b.l.Failbacks)
	}
}
