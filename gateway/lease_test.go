package gateway

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// fakeCluster is the lease object as the OSDs keep it (cls_lock's
// semantics: a lock expires at its duration after the call that took or
// renewed it) and the OSD blocklist, on a fake clock.
type fakeCluster struct {
	now       time.Duration
	lease     time.Duration
	holder    string // client address holding the lock, "" none
	cookie    string
	expires   time.Duration
	rec       Holder
	blocklist map[string]bool
	fenceTime time.Duration // how long a Fence takes
	watchers  []*Lease      // poked by a Notify
	fences    map[string]int
	standby   map[string]announcement // by gateway name
}

// announcement is a standby's: its run's cookie, until it lapses.
type announcement struct {
	cookie string
	until  time.Duration
}

func newCluster(lease time.Duration) *fakeCluster {
	return &fakeCluster{lease: lease, blocklist: map[string]bool{}, fences: map[string]int{}, standby: map[string]announcement{}}
}

var errTimeout = errors.New("timed out")

// fakeClient is one gateway's RADOS client.
type fakeClient struct {
	c           *fakeCluster
	addr        string
	cookie      string
	unreachable bool // a partition: every call times out
	calls       []string
	// beforeRecord, if set, runs as a Record reaches the cluster: what
	// others do while the call is on its way.
	beforeRecord func()
}

func (f *fakeClient) check(call string) error {
	f.calls = append(f.calls, call)
	if f.unreachable {
		return errTimeout
	}
	if f.c.blocklist[f.addr] {
		return ErrBlocklisted
	}
	return nil
}

func (f *fakeClient) held() bool { return f.c.holder != "" && f.c.now < f.c.expires }

func (f *fakeClient) mine() bool {
	return f.held() && f.c.holder == f.addr && f.c.cookie == f.cookie
}

func (f *fakeClient) Lock(renew bool) error {
	if err := f.check("lock"); err != nil {
		return err
	}
	switch {
	case f.held() && !f.mine():
		return ErrBusy
	case renew && !f.mine():
		return ErrLost
	}
	f.c.holder, f.c.cookie, f.c.expires = f.addr, f.cookie, f.c.now+f.c.lease
	return nil
}

func (f *fakeClient) Unlock() error {
	if err := f.check("unlock"); err != nil {
		return err
	}
	if !f.mine() {
		return ErrLost
	}
	f.c.holder = ""
	return nil
}

func (f *fakeClient) Recorded() (Holder, error) {
	if err := f.check("recorded"); err != nil {
		return Holder{}, err
	}
	return f.c.rec, nil
}

// Record is cls_lock's assert_locked and the attribute in one write op.
func (f *fakeClient) Record(h Holder) error {
	if err := f.check("record"); err != nil {
		return err
	}
	if f.beforeRecord != nil {
		f.beforeRecord()
	}
	if !f.mine() {
		return ErrLost
	}
	f.c.rec = h
	return nil
}

func (f *fakeClient) Self() (string, error) { return f.addr, f.check("self") }

func (f *fakeClient) Fence(addr string) error {
	if err := f.check("fence " + addr); err != nil {
		return err
	}
	f.c.now += f.c.fenceTime
	f.c.blocklist[addr] = true
	f.c.fences[addr]++
	return nil
}

func (f *fakeClient) Announce(me Holder, ttl time.Duration) error {
	if err := f.check("announce"); err != nil {
		return err
	}
	f.c.standby[me.Name] = announcement{me.Announcement(), f.c.now + ttl}
	return nil
}

func (f *fakeClient) Announced(name string) (string, error) {
	if err := f.check("announced " + name); err != nil {
		return "", err
	}
	if a := f.c.standby[name]; f.c.now < a.until {
		return a.cookie, nil
	}
	return "", nil
}

// gw is one daemon: its lease on group 1, run synchronously at each step.
type gw struct {
	name   string
	l      *Lease
	client *fakeClient
	paused bool // SIGSTOP: no step runs
	// store, if set, is the client as the lease sees it (a wrapper that
	// fails some calls); client otherwise.
	store Store
	// bootLag is how far this machine's CLOCK_BOOTTIME is behind the
	// cluster's time: a VM's clocks stand still while it is paused.
	bootLag time.Duration
	// rebuild, if set, is the daemon's rebuild of the group's client
	// (OpRebuild), and turns Lease.Rebuild on.
	rebuild func() error
	// namespaces is the digest of the namespaces it serves in the group.
	namespaces string
}

// epoch is the fake wall clock's origin.
var epoch = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// withWall gives g's lease the wall clock, which follows the cluster's
// time (the guest's time service puts it right after a pause).
func (g *gw) withWall() *gw {
	g.l.Wall = func() time.Time { return epoch.Add(g.client.c.now) }
	return g
}

var timing = DefaultTiming(10 * time.Second) // renew 2.5 s, deadline 7 s

func newGW(c *fakeCluster, name, addr string) *gw {
	return &gw{name: name, l: &Lease{Group: 1, Timing: timing, Name: name},
		client: &fakeClient{c: c, addr: addr, cookie: name + "-" + addr}}
}

func (g *gw) me() Holder {
	return Holder{Name: g.name, Cookie: g.client.cookie, Namespaces: g.namespaces}
}

// step wakes the lease and runs the op it asks for; ops take the time
// the fake cluster's calls advance its clock by.
func (g *gw) step() {
	if g.paused {
		return
	}
	c := g.client.c
	g.l.Rebuild = g.rebuild != nil
	op, _ := g.l.Wake(c.now - g.bootLag)
	if op == OpNone {
		return
	}
	started, wall := c.now-g.bootLag, epoch.Add(c.now)
	if op == OpRebuild {
		g.l.Done(c.now-g.bootLag, Result{Op: op, Started: started, StartedWall: wall, Err: g.rebuild()})
		return
	}
	var s Store = g.client
	if g.store != nil {
		s = g.store
	}
	fenced, err := Run(op, s, g.me(), g.l.Preferred, g.l.HonourHandover(started))
	looked, ready, _ := LookForStandby(op, err, s, g.me(), g.l.Preferred, 2*g.l.Timing.Renew, g.l.Announces(started))
	g.l.Done(c.now-g.bootLag, Result{Op: op, Started: started, StartedWall: wall, Fenced: fenced, Err: err, Looked: looked, Ready: ready})
}

// sim advances the fake clock in 100 ms steps for d, stepping every
// gateway and checking the safety property at every step: a gateway that
// is the owner holds the lock in the cluster, unexpired, and is not
// blocklisted; so there is never more than one.
func sim(t *testing.T, c *fakeCluster, d time.Duration, gws ...*gw) {
	t.Helper()
	for end := c.now + d; c.now < end; c.now += 100 * time.Millisecond {
		owners := 0
		for _, g := range gws {
			g.step()
			// A stopped or dead process serves nothing, whatever its
			// frozen state says; fencing covers what it had in flight.
			if g.paused || g.l.State() != Owner {
				continue
			}
			owners++
			if !g.client.mine() || c.blocklist[g.client.addr] {
				t.Fatalf("at %v: %s is the owner without holding the lock (holder %q until %v, blocklisted %v)",
					c.now, g.name, c.holder, c.expires, c.blocklist[g.client.addr])
			}
			// The record names the owner: whoever takes the lock after it
			// fences this run, not another.
			if c.rec.Cookie != g.client.cookie {
				t.Fatalf("at %v: %s is the owner but the record names %+v", c.now, g.name, c.rec)
			}
		}
		if owners > 1 {
			t.Fatalf("at %v: %d owners", c.now, owners)
		}
	}
}

func owner(gws ...*gw) string {
	s := ""
	for _, g := range gws {
		if g.l.State() == Owner {
			s += g.name
		}
	}
	return s
}

func TestFirstTakesTheGroupOthersStandBy(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	sim(t, c, time.Second, a, b)
	if owner(a, b) != "a" || b.l.State() != Standby {
		t.Fatalf("owner %q, b %v", owner(a, b), b.l.State())
	}
	if b.l.LastErr != nil {
		t.Errorf("b's last error %v: a standby refused the lock is not in error", b.l.LastErr)
	}
	if a.l.Takeovers != 1 || a.l.Fencings != 0 {
		t.Errorf("takeovers %d fencings %d", a.l.Takeovers, a.l.Fencings)
	}
	if c.rec != (Holder{Name: "a", Cookie: a.client.cookie, Addr: a.client.addr}) {
		t.Errorf("recorded %+v", c.rec)
	}
	// A minute later nothing moved: renewals keep it, b keeps trying.
	sim(t, c, time.Minute, a, b)
	if owner(a, b) != "a" || a.l.Takeovers != 1 || b.l.Takeovers != 0 {
		t.Fatalf("after a minute: owner %q, takeovers %d/%d", owner(a, b), a.l.Takeovers, b.l.Takeovers)
	}
}

// kill -9 of the owner: the lock expires, the survivor fences the dead
// owner's client and takes the group within the lease plus one try.
func TestDeadOwnerIsFencedAndReplaced(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	sim(t, c, time.Second, a, b)
	killed := c.now
	a.paused = true // dead: never steps again
	for owner(b) == "" {
		sim(t, c, 100*time.Millisecond, a, b)
		if c.now-killed > timing.Lease+timing.Renew {
			t.Fatalf("no takeover %v after the kill", c.now-killed)
		}
	}
	if !c.blocklist[a.client.addr] || b.l.Fencings != 1 {
		t.Fatalf("a's client not fenced: blocklist %v, fencings %d", c.blocklist, b.l.Fencings)
	}
	if c.rec.Name != "b" {
		t.Errorf("recorded %+v", c.rec)
	}
	// The dead daemon restarts: a new client and cookie. It stands by and
	// stays so, with no fencing and no flapping.
	a2 := newGW(c, "a", "10.0.0.1:0/3")
	sim(t, c, time.Minute, a2, b)
	if owner(a2, b) != "b" || a2.l.Takeovers != 0 || b.l.Takeovers != 1 || len(c.blocklist) != 1 {
		t.Fatalf("after the restart: owner %q, takeovers %d/%d, blocklist %v", owner(a2, b), a2.l.Takeovers, b.l.Takeovers, c.blocklist)
	}
}

// A partition: the owner's calls time out. It steps down at its deadline,
// before its lock expires for the others, and never comes back while the
// partition lasts; the peer takes over after the expiry.
func TestPartitionedOwnerStepsDownBeforeExpiry(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	sim(t, c, time.Second, a, b)
	a.client.unreachable = true
	aExpires := c.expires // no renewal can reach the cluster from now on
	var down, taken time.Duration
	for i := 0; i < 200 && taken == 0; i++ {
		sim(t, c, 100*time.Millisecond, a, b)
		if down == 0 && a.l.State() != Owner {
			down = c.now
		}
		if taken == 0 && b.l.State() == Owner {
			taken = c.now
		}
	}
	if down == 0 || taken == 0 || down >= taken {
		t.Fatalf("a stepped down at %v, b took over at %v", down, taken)
	}
	if down > aExpires-(timing.Lease-timing.Deadline)+100*time.Millisecond { // seen after the step
		t.Errorf("a stepped down at %v, its lock expired at %v: want %v of margin", down, aExpires, timing.Lease-timing.Deadline)
	}
	// The partition heals: a is fenced and stays out.
	a.client.unreachable = false
	sim(t, c, 10*time.Second, a, b)
	if a.l.State() != Blocklisted || owner(a, b) != "b" {
		t.Fatalf("after the partition: a %v, owner %q", a.l.State(), owner(a, b))
	}
}

// SIGSTOP of the owner, SIGCONT after the takeover: at its first wake it
// is past its deadline and steps down before any call; its next call is
// refused (blocklisted) and it stays inaccessible.
func TestStoppedOwnerResumesInaccessible(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	sim(t, c, time.Second, a, b)
	a.paused = true
	sim(t, c, 15*time.Second, a, b)
	if b.l.State() != Owner || !c.blocklist[a.client.addr] {
		t.Fatalf("b %v, blocklist %v", b.l.State(), c.blocklist)
	}
	if a.l.State() != Owner {
		t.Fatal("a stopped: its state cannot have moved")
	}
	a.paused = false
	calls := len(a.client.calls)
	if op, _ := a.l.Wake(c.now); a.l.State() != Standby || op != OpAcquire {
		t.Fatalf("a resumed: %v, op %v", a.l.State(), op)
	}
	if len(a.client.calls) != calls {
		t.Fatal("a called the cluster before stepping down")
	}
	_, err := Run(OpAcquire, a.client, a.me(), "", true)
	a.l.Done(c.now, Result{Op: OpAcquire, Started: c.now, Err: err})
	if a.l.State() != Blocklisted {
		t.Fatalf("a after a refused call: %v (%v)", a.l.State(), err)
	}
	sim(t, c, time.Minute, a, b)
	if a.l.State() != Blocklisted || owner(a, b) != "b" {
		t.Fatalf("a %v, owner %q", a.l.State(), owner(a, b))
	}
	if op, next := a.l.Wake(c.now); op != OpNone || next != 0 {
		t.Errorf("blocklisted: op %v next %v", op, next)
	}
}

// Planned handover: the owner steps down at once, releases the lock and
// clears the record; the peer takes the group at its next try, without
// fencing; the releaser leaves it alone during its hold-off.
func TestReleaseHandsOverWithoutFencing(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	sim(t, c, time.Second, a, b)
	if !a.l.Release(c.now) || a.l.State() != Standby {
		t.Fatalf("release: a %v", a.l.State())
	}
	if b.l.Release(c.now) {
		t.Fatal("b released a group it does not own")
	}
	released := c.now
	for owner(b) == "" {
		sim(t, c, 100*time.Millisecond, a, b)
		if c.now-released > timing.Renew+time.Second {
			t.Fatalf("b has not taken the group %v after the release", c.now-released)
		}
	}
	if len(c.blocklist) != 0 || b.l.Fencings != 0 {
		t.Fatalf("a clean release fenced: %v", c.blocklist)
	}
	sim(t, c, time.Minute, a, b)
	if owner(a, b) != "b" {
		t.Fatalf("owner %q", owner(a, b))
	}
	// b releases and nobody else wants it: a takes it after a's hold-off
	// is over (long past), b after its own.
	b.l.Release(c.now)
	sim(t, c, timing.Renew+time.Second, a, b)
	if owner(a, b) != "a" {
		t.Fatalf("owner %q after b's release", owner(a, b))
	}
}

// The only gateway releases: it takes the group back after its hold-off.
func TestReleaseAloneRetakesAfterHoldoff(t *testing.T) {
	c := newCluster(timing.Lease)
	a := newGW(c, "a", "10.0.0.1:0/1")
	sim(t, c, time.Second, a)
	a.l.Release(c.now)
	released := c.now
	for owner(a) == "" {
		sim(t, c, 100*time.Millisecond, a)
	}
	if d := c.now - released; d < timing.Holdoff || d > timing.Holdoff+timing.Renew+time.Second {
		t.Fatalf("retaken %v after the release", d)
	}
	if len(c.blocklist) != 0 {
		t.Fatal("fenced itself")
	}
}

// A release asked while a renewal is in flight runs after it.
func TestReleaseDuringRenewal(t *testing.T) {
	c := newCluster(timing.Lease)
	a := newGW(c, "a", "10.0.0.1:0/1")
	sim(t, c, time.Second, a)
	c.now += timing.Renew
	op, _ := a.l.Wake(c.now)
	if op != OpRenew {
		t.Fatalf("op %v", op)
	}
	a.l.Release(c.now)
	a.l.Done(c.now, Result{Op: OpRenew, Started: c.now})
	if a.l.State() != Standby {
		t.Fatalf("a renewal after the release made a %v", a.l.State())
	}
	if op, _ := a.l.Wake(c.now); op != OpRelease {
		t.Fatalf("then %v", op)
	}
}

// Renewals that fail for a while (the monitors or OSDs slow) keep the
// owner until its deadline only; one that succeeds in time extends it.
func TestRenewalErrors(t *testing.T) {
	c := newCluster(timing.Lease)
	a := newGW(c, "a", "10.0.0.1:0/1")
	sim(t, c, 100*time.Millisecond, a)
	took := c.now - 100*time.Millisecond
	a.client.unreachable = true
	sim(t, c, timing.Deadline-200*time.Millisecond, a)
	if a.l.State() != Owner {
		t.Fatalf("stepped down at %v, before the deadline", c.now)
	}
	a.client.unreachable = false
	sim(t, c, timing.Renew+100*time.Millisecond, a)
	if a.l.State() != Owner || a.l.deadline <= took+timing.Deadline {
		t.Fatalf("a renewal in time did not keep the group: %v, deadline %v", a.l.State(), a.l.deadline)
	}
	a.client.unreachable = true
	for a.l.State() == Owner {
		sim(t, c, 100*time.Millisecond, a)
	}
	if !a.client.held() {
		t.Fatal("stepped down after the lock expired")
	}
}

// A takeover whose fencing outlasts the deadline does not serve on a lock
// that may be about to expire: it stays inaccessible and turns optimized
// after the next lock call.
func TestSlowFencingTakesAnotherRound(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	sim(t, c, time.Second, a, b)
	a.paused = true
	c.fenceTime = timing.Deadline
	for b.l.Fencings == 0 {
		sim(t, c, 100*time.Millisecond, a, b)
	}
	if b.l.State() != Standby {
		t.Fatalf("b turned %v after a fencing of %v", b.l.State(), c.fenceTime)
	}
	sim(t, c, timing.Renew+100*time.Millisecond, a, b)
	if b.l.State() != Owner || b.l.Fencings != 1 {
		t.Fatalf("b %v, fencings %d", b.l.State(), b.l.Fencings)
	}
}

// A failed fencing leaves the group inaccessible everywhere rather than
// serving beside a possibly live old owner.
type failFence struct{ *fakeClient }

func (failFence) Fence(string) error {
	return fmt.Errorf("mon command refused: %w", errors.New("EACCES"))
}

func TestFailedFencingDoesNotServe(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	sim(t, c, time.Second, a, b)
	a.paused = true
	c.now += timing.Lease
	for range 10 {
		op, _ := b.l.Wake(c.now)
		if op != OpNone {
			fenced, err := Run(op, failFence{b.client}, b.me(), "", true)
			b.l.Done(c.now, Result{Op: op, Started: c.now, Fenced: fenced, Err: err})
		}
		c.now += timing.Renew
	}
	if b.l.State() != Standby || b.l.LastErr == nil {
		t.Fatalf("b %v, last error %v", b.l.State(), b.l.LastErr)
	}
}

func TestWakeTimes(t *testing.T) {
	l := &Lease{Group: 1, Timing: timing}
	op, next := l.Wake(0)
	if op != OpAcquire || next != 0 {
		t.Fatalf("first wake: %v, next %v (busy: only the result)", op, next)
	}
	l.Done(time.Second, Result{Op: OpAcquire, Started: 0})
	op, next = l.Wake(time.Second)
	if op != OpNone || next != timing.Renew {
		t.Fatalf("owner: %v next %v", op, next)
	}
	op, next = l.Wake(timing.Renew)
	if op != OpRenew || next != timing.Deadline {
		t.Fatalf("renewing: %v next %v, want the deadline", op, next)
	}
}

// notifyingClient tells every watcher of the object of a release.
type notifyingClient struct{ *fakeClient }

func (n notifyingClient) Notify() error {
	for _, l := range n.c.watchers {
		l.Poke()
	}
	return nil
}

// With a watch on the object, a release reaches the peer at once: it
// takes the group at its next step, not at its next interval.
func TestReleaseNotifiesPeers(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2")
	c.watchers = []*Lease{a.l, b.l}
	sim(t, c, time.Second, a, b)
	a.l.Release(c.now)
	op, _ := a.l.Wake(c.now)
	if _, err := Run(op, notifyingClient{a.client}, a.me(), "", true); op != OpRelease || err != nil {
		t.Fatalf("%v: %v", op, err)
	}
	a.l.Done(c.now, Result{Op: OpRelease, Started: c.now})
	b.step()
	if b.l.State() != Owner || b.l.Fencings != 0 {
		t.Fatalf("b right after the notified release: %v, fencings %d", b.l.State(), b.l.Fencings)
	}
	a.step()
	if a.l.State() != Standby {
		t.Fatal("a took the group back during its hold-off")
	}
}

// A renewal that returns after the deadline, even successfully, does not
// make the owner again: the next acquire does, through the record.
func TestLateRenewalDoesNotServe(t *testing.T) {
	l := &Lease{Group: 1, Timing: timing}
	l.Wake(0)
	l.Done(0, Result{Op: OpAcquire})
	if op, _ := l.Wake(timing.Renew); op != OpRenew {
		t.Fatalf("op %v", op)
	}
	l.Wake(timing.Deadline)
	if l.State() != Standby {
		t.Fatalf("%v at the deadline", l.State())
	}
	l.Done(timing.Deadline+time.Second, Result{Op: OpRenew, Started: timing.Renew})
	if l.State() != Standby {
		t.Fatalf("%v after a late renewal", l.State())
	}
	if op, _ := l.Wake(timing.Deadline + time.Second); op != OpAcquire {
		t.Fatalf("then %v, want an acquire", op)
	}
}

// takesOver steps g until it owns the group, checking the invariant.
func takesOver(t *testing.T, c *fakeCluster, g *gw, gws ...*gw) {
	t.Helper()
	for start := c.now; g.l.State() != Owner; {
		sim(t, c, 100*time.Millisecond, gws...)
		if c.now-start > 3*timing.Lease {
			t.Fatalf("%s has not taken the group after %v", g.name, c.now-start)
		}
	}
}

// A taker whose calls are slow: its lock expires before its record
// reaches the cluster, and meanwhile another gateway fenced the previous
// owner, recorded itself and serves. The slow record is refused, so the
// record names the real owner, and whoever takes over from that owner
// later fences it.
func TestSlowTakerCannotRecordOverTheOwner(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b, d := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2"), newGW(c, "d", "10.0.0.4:0/4")
	sim(t, c, time.Second, a)
	a.paused = true // dead
	c.now += timing.Lease
	b.client.beforeRecord = func() {
		b.client.beforeRecord = nil
		c.now += timing.Lease // b's lock expires on the way
		d.step()              // d takes it, fences a, records itself
	}
	b.step()
	if d.l.State() != Owner || b.l.State() == Owner {
		t.Fatalf("d %v, b %v", d.l.State(), b.l.State())
	}
	if c.rec.Name != "d" {
		t.Fatalf("recorded %+v while d owns the group", c.rec)
	}
	sim(t, c, time.Minute, b, d)
	if owner(b, d) != "d" {
		t.Fatalf("owner %q", owner(b, d))
	}
	d.paused = true // d dies: b must fence it before serving
	takesOver(t, c, b, b, d)
	if !c.blocklist[d.client.addr] {
		t.Fatalf("b took over from d without fencing it (blocklist %v)", c.blocklist)
	}
}

// A release whose record clear reaches the cluster after its lock expired
// and a peer took the group over cannot clear the peer's record: whoever
// takes over from the peer later still fences it.
func TestLateReleaseCannotClearTheNextOwnersRecord(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b, d := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2"), newGW(c, "d", "10.0.0.4:0/4")
	sim(t, c, time.Second, a, b)
	a.l.Release(c.now)
	a.client.beforeRecord = func() {
		a.client.beforeRecord = nil
		c.now += timing.Lease // a's lock expires on the way
		b.step()              // b takes it and records itself
	}
	a.step()
	if b.l.State() != Owner || c.rec.Name != "b" {
		t.Fatalf("b %v, recorded %+v after a's late release", b.l.State(), c.rec)
	}
	b.paused = true // b dies: whoever takes over must fence it first
	for start := c.now; owner(a, d) == ""; {
		sim(t, c, 100*time.Millisecond, a, b, d)
		if c.now-start > 3*timing.Lease {
			t.Fatalf("nobody took over %v after b died", c.now-start)
		}
	}
	if !c.blocklist[b.client.addr] {
		t.Fatalf("%s took over from b without fencing it (blocklist %v)", owner(a, d), c.blocklist)
	}
}

// A paused VM: its boot clock stood still for the pause, the wall clock
// did not (or is put right on resume). On resume the owner is past its
// deadline on the wall clock and steps down before any call, though its
// boot clock says it renewed a second ago.
func TestPausedVMResumesInaccessible(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b := newGW(c, "a", "10.0.0.1:0/1").withWall(), newGW(c, "b", "10.0.0.2:0/2").withWall()
	sim(t, c, time.Second, a, b)
	a.paused = true
	paused := c.now
	sim(t, c, 15*time.Second, a, b)
	if b.l.State() != Owner || a.l.State() != Owner {
		t.Fatalf("b %v, a (paused) %v", b.l.State(), a.l.State())
	}
	a.paused, a.bootLag = false, c.now-paused
	calls := len(a.client.calls)
	a.l.Wake(c.now - a.bootLag)
	if a.l.State() == Owner {
		t.Fatal("a resumed optimized: its boot clock stood still, the wall clock is past its deadline")
	}
	if len(a.client.calls) != calls {
		t.Fatal("a called the cluster before stepping down")
	}
}

// The wall clock stepped back (a time service) does not keep an owner
// past its deadline on the boot clock, and the wall clock stepped forward
// steps it down early: the deadline passes when either clock says so.
func TestDeadlineOnEitherClock(t *testing.T) {
	for _, tc := range []struct {
		name       string
		boot, wall time.Duration // elapsed since the acquire started
		owner      bool
	}{
		{"both short", timing.Deadline - time.Millisecond, timing.Deadline - time.Millisecond, true},
		{"boot past, wall stepped back", timing.Deadline, -time.Hour, false},
		{"wall past, boot stood still", time.Millisecond, timing.Deadline, false},
	} {
		wall := epoch
		l := &Lease{Group: 1, Timing: timing, Wall: func() time.Time { return wall }}
		l.Wake(0)
		l.Done(0, Result{Op: OpAcquire, Started: 0, StartedWall: epoch})
		if l.State() != Owner {
			t.Fatalf("%s: not the owner after the acquire", tc.name)
		}
		wall = epoch.Add(tc.wall)
		l.Wake(tc.boot)
		if got := l.State() == Owner; got != tc.owner {
			t.Errorf("%s: owner %v, want %v", tc.name, got, tc.owner)
		}
	}
}

// A standby that cannot fence (its user lacks the caps, say) gives the
// lock back and holds off, so that a peer that can fence takes the group
// over instead of finding the lock busy for ever.
func TestStandbyThatCannotFenceLetsAnotherTakeOver(t *testing.T) {
	c := newCluster(timing.Lease)
	a, b, d := newGW(c, "a", "10.0.0.1:0/1"), newGW(c, "b", "10.0.0.2:0/2"), newGW(c, "d", "10.0.0.4:0/4")
	b.store = failFence{b.client}
	sim(t, c, time.Second, a)
	a.paused = true // dead
	c.now += timing.Lease
	b.step() // b tries first, and fails to fence
	if b.l.LastErr == nil || !errors.Is(b.l.LastErr, ErrFenceFailed) {
		t.Fatalf("b's last error %v, want a failed fencing", b.l.LastErr)
	}
	if b.client.held() && c.holder == b.client.addr {
		t.Fatal("b kept the lock after failing to fence")
	}
	if op, next := b.l.Wake(c.now + timing.Renew); op != OpNone || next < c.now+timing.Holdoff {
		t.Fatalf("b after its failed fencing: %v, next try at %v, want none before %v", op, next, c.now+timing.Holdoff)
	}
	takesOver(t, c, d, a, b, d)
	if !c.blocklist[a.client.addr] || b.l.State() == Owner {
		t.Fatalf("d took over: blocklist %v, b %v", c.blocklist, b.l.State())
	}
}
