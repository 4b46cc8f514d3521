package sharedstate

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// resvEngine stands for a namespace's reservation engine over a store, as
// fabrics runs it: a change is computed and stored under the mutex, and
// computed again on the reloaded state when the store says it changed;
// the refresher's reload only runs when no change holds the mutex. A
// state loaded is enforced once the fence is over, which fence can hold.
type resvEngine struct {
	mu          sync.Mutex
	st          fabrics.ReservationState
	store       *sharedResvStore
	unavailable atomic.Bool
	lease       atomic.Pointer[time.Time]
	fence       atomic.Pointer[fenceGate]
}

// fenceGate holds the next reload between publishing the state and
// telling the store it is enforced, as a write still in the backend from
// a host that lost access holds the fence.
type fenceGate struct{ reached, release chan struct{} }

// holdFence makes e's next reload wait in its fence until release.
func (e *resvEngine) holdFence(t *testing.T) (reached <-chan struct{}, release func()) {
	g := &fenceGate{reached: make(chan struct{}), release: make(chan struct{})}
	e.fence.Store(g)
	release = sync.OnceFunc(func() { close(g.release) })
	t.Cleanup(release)
	return g.reached, release
}

func (e *resvEngine) TryReloadReservation() (bool, error) {
	if !e.mu.TryLock() {
		return false, nil
	}
	defer e.mu.Unlock()
	return true, e.reloadLocked()
}

func (e *resvEngine) reloadLocked() error {
	st, err := e.store.Load()
	if err != nil {
		return err
	}
	e.st = st
	if g := e.fence.Swap(nil); g != nil {
		close(g.reached)
		<-g.release
	}
	e.store.Enforced()
	return nil
}

func (e *resvEngine) ReservationUnavailable() bool        { return e.unavailable.Load() }
func (e *resvEngine) SetReservationUnavailable(on bool)   { e.unavailable.Store(on) }
func (e *resvEngine) SetReservationLease(until time.Time) { e.lease.Store(&until) }

// leaseEnd is the end of the lease the store last gave, or the zero time.
func (e *resvEngine) leaseEnd() time.Time {
	if l := e.lease.Load(); l != nil {
		return *l
	}
	return time.Time{}
}

func (e *resvEngine) state() fabrics.ReservationState {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.st
	st.Registrants = slices.Clone(e.st.Registrants)
	return st
}

// change applies f as a reservation command does.
func (e *resvEngine) change(f func(*fabrics.ReservationState)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for range 20 {
		next := e.st
		next.Registrants = slices.Clone(e.st.Registrants)
		f(&next)
		err := e.store.Store(next)
		if err == nil {
			e.st = next
			return nil
		}
		if !errors.Is(err, fabrics.ErrReservationChanged) {
			return err
		}
		if err := e.reloadLocked(); err != nil {
			return err
		}
	}
	return errors.New("the state kept changing")
}

// register adds host id with key, once.
func register(id byte, key uint64) func(*fabrics.ReservationState) {
	return func(st *fabrics.ReservationState) {
		for _, r := range st.Registrants {
			if r.HostID[0] == id {
				return
			}
		}
		st.Registrants = append(st.Registrants, fabrics.Registrant{HostID: [16]byte{id}, Key: key})
		st.Generation++
	}
}

// failingDevice fails every read while fail is set.
type failingDevice struct {
	resvDevice
	fail atomic.Bool
}

func (d *failingDevice) ReadAt(p []byte, off int64) (int, error) {
	if d.fail.Load() {
		return 0, errors.New("injected read error")
	}
	return d.resvDevice.ReadAt(p, off)
}

// testClock is a resvClock that moves only when slept on; each Sleep
// first runs onSleep (another daemon's refresh, say), and past limit it
// blocks for good and closes stuck. Now is off by the wall clock's steps
// (stepWall); Uptime is not.
type testClock struct {
	mu      sync.Mutex
	now     time.Time
	step    time.Duration
	onSleep func()
	limit   time.Time
	stuck   chan struct{}
	once    sync.Once
}

// testBoot is the test clock's boot, which Uptime counts from.
var testBoot = time.Unix(1e9, 0).Add(-time.Hour)

func newTestClock() *testClock {
	c := &testClock{now: time.Unix(1e9, 0), stuck: make(chan struct{})}
	c.limit = c.now.Add(time.Hour)
	return c
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Add(c.step)
}

func (c *testClock) Uptime() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(testBoot)
}

// stepWall sets the wall clock by d, as an operator or NTP may.
func (c *testClock) stepWall(d time.Duration) {
	c.mu.Lock()
	c.step += d
	c.mu.Unlock()
}

func (c *testClock) Sleep(d time.Duration) {
	if c.onSleep != nil {
		c.onSleep()
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	over := c.now.After(c.limit)
	c.mu.Unlock()
	if over {
		c.once.Do(func() { close(c.stuck) })
		select {}
	}
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// resvArea is a file standing for the shared device (O_DIRECT is not
// asked for: a test's temporary directory may not take it).
func resvArea(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shared")
	if err := os.WriteFile(path, make([]byte, 3*config.SharedReservationsArea), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// resvDaemon opens slot's store on path with its engine, loaded as the
// daemon does at start.
func resvDaemon(t *testing.T, path string, slot int, clock resvClock, timeout time.Duration) (*sharedResvStore, *resvEngine) {
	t.Helper()
	log := logrus.New()
	log.SetOutput(testWriter{t})
	s, err := openSharedResv(path, 0, slot, logrus.NewEntry(log).WithField("slot", slot))
	if err != nil {
		t.Fatal(err)
	}
	s.timeout = timeout
	if clock != nil {
		s.clock = clock
	}
	e := &resvEngine{store: s}
	if e.st, err = s.Load(); err != nil {
		t.Fatal(err)
	}
	s.attach(e)
	t.Cleanup(func() { s.Close() })
	return s, e
}

// settle runs a refresh of s and waits for the reload it started, if any.
func settle(s *sharedResvStore) {
	s.tick()
	s.reloads.Wait()
}

// tickWithin runs a refresh of s, which must return within 10 s whatever
// the namespace's reload is waiting for.
func tickWithin(t *testing.T, s *sharedResvStore) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		s.tick()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a refresh has not returned for 10 s: it waits for the namespace's fence, and the heartbeat stops meanwhile")
	}
}

// heartbeatOf reads s's heartbeat block.
func heartbeatOf(t *testing.T, s *sharedResvStore) heartbeat {
	t.Helper()
	b, err := s.readBlock(1 + int(s.slot))
	if err != nil {
		t.Fatal(err)
	}
	hb, err := decodeHeartbeat(b, s.slot)
	if err != nil {
		t.Fatal(err)
	}
	return hb
}

// changeWithin10T runs change through e, a's engine, and fails with stuck
// if it has not completed when the clock reaches 10T.
func changeWithin10T(t *testing.T, clock *testClock, a *sharedResvStore, e *resvEngine, change func(*fabrics.ReservationState), stuck string) {
	t.Helper()
	clock.limit = clock.Now().Add(10 * a.timeout)
	done := make(chan error, 1)
	go func() { done <- e.change(change) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-clock.stuck:
		t.Fatal(stuck)
	}
}

// resvPair opens daemons a (slot 0) and b (slot 1) on one area, on one
// test clock, with T = 1 s.
func resvPair(t *testing.T) (clock *testClock, a *sharedResvStore, ea *resvEngine, b *sharedResvStore, eb *resvEngine) {
	t.Helper()
	path := resvArea(t)
	clock = newTestClock()
	a, ea = resvDaemon(t, path, 0, clock, time.Second)
	b, eb = resvDaemon(t, path, 1, clock, time.Second)
	return clock, a, ea, b, eb
}

// timedChange is changeWithin10T of a registration through a, returning
// the test clock's time it took.
func timedChange(t *testing.T, clock *testClock, a *sharedResvStore, ea *resvEngine, stuck string) time.Duration {
	t.Helper()
	start := clock.Now()
	changeWithin10T(t, clock, a, ea, register(1, 0xa), stuck)
	return clock.Now().Sub(start)
}

// openResvArea opens the area at path for a test to write into, as
// another daemon or a damaged device would.
func openResvArea(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// peerRecord returns what writes, over a's record in the area at path,
// the record the peer in slot 1 would: sequence 1, host 2 registered.
func peerRecord(t *testing.T, path string, a *sharedResvStore) (writePeer func() error) {
	t.Helper()
	f := openResvArea(t, path)
	peers, err := encodeRecord(record{id: recordID{seq: 1, writer: 1},
		st: fabrics.ReservationState{Generation: 1, Registrants: []fabrics.Registrant{{HostID: [16]byte{2}, Key: 0xb}}}})
	if err != nil {
		t.Fatal(err)
	}
	return func() error {
		_, err := f.WriteAt(peers, a.base)
		return err
	}
}

// resvBesidePeer is daemon a in slot 0 of a new area at path, on the
// test's clock, and what writes the peer's record over a's (peerRecord).
func resvBesidePeer(t *testing.T) (path string, clock *testClock, a *sharedResvStore, ea *resvEngine, writePeer func() error) {
	t.Helper()
	path, clock, a, ea = resvAlone(t)
	return path, clock, a, ea, peerRecord(t, path, a)
}

// resvAlone is daemon a in slot 0 of a new area at path, on the test's
// clock, with a one-second timeout.
func resvAlone(t *testing.T) (path string, clock *testClock, a *sharedResvStore, ea *resvEngine) {
	t.Helper()
	path = resvArea(t)
	clock = newTestClock()
	a, ea = resvDaemon(t, path, 0, clock, time.Second)
	return path, clock, a, ea
}

// wantBothRegistered fails unless a's record and the state the engine of
// daemon who enforces both hold the two hosts' registrations.
func wantBothRegistered(t *testing.T, a *sharedResvStore, e *resvEngine, who string) {
	t.Helper()
	st, err := a.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Registrants) != 2 || len(e.state().Registrants) != 2 {
		t.Fatalf("record %+v, %s enforces %+v: want both registrations", st, who, e.state())
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestSharedResvConcurrentChanges: both daemons change the reservation at
// once, round after round; every change lands, once, and both daemons
// and the record end with the same state. A change waiting for the peer
// does not hold up the peer's refresher, nor wait for a peer whose own
// change lost.
func TestSharedResvConcurrentChanges(t *testing.T) {
	path := resvArea(t)
	const timeout = 40 * time.Millisecond
	a, ea := resvDaemon(t, path, 0, nil, timeout)
	b, eb := resvDaemon(t, path, 1, nil, timeout)
	a.start(ea)
	b.start(eb)
	const rounds = 6
	done := make(chan error, 2*rounds)
	for i := range rounds {
		go func() { done <- ea.change(register(byte(2*i+1), 0xa)) }()
		go func() { done <- eb.change(register(byte(2*i+2), 0xb)) }()
	}
	// Each change takes about P with both up, 2T if one waits on the
	// other for nothing: far less than this.
	deadline := time.After(20 * time.Second)
	for range 2 * rounds {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("concurrent changes have not completed after 20 s: they wait on each other")
		}
	}
	st, err := a.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Registrants) != 2*rounds || st.Generation != 2*rounds {
		t.Fatalf("record after %d changes: generation %d, %d registrants %v", 2*rounds, st.Generation, len(st.Registrants), st.Registrants)
	}
	// A change completes once the peer enforces it: both enforce the last.
	if sa, sb := ea.state(), eb.state(); len(sa.Registrants) != 2*rounds || len(sb.Registrants) != 2*rounds {
		t.Fatalf("the daemons enforce %d and %d registrations; want %d", len(sa.Registrants), len(sb.Registrants), 2*rounds)
	}
}

// TestSharedResvPeerApplies: a change completes once the peer's heartbeat
// shows it enforces it, well before 2T.
func TestSharedResvPeerApplies(t *testing.T) {
	clock, a, ea, b, eb := resvPair(t)
	b.tick()
	clock.onSleep = func() { settle(b) } // the peer refreshes while a waits
	if took := timedChange(t, clock, a, ea, "the change still waits after 10T for a peer that refreshes"); took >= 2*a.timeout {
		t.Fatalf("the change took %v with the peer refreshing; want less than 2T", took)
	}
	if st := eb.state(); len(st.Registrants) != 1 {
		t.Fatalf("the peer enforces %+v once the change completed", st)
	}
}

// TestSharedResvPeerGone: a peer whose heartbeat stopped lets a change
// complete after 2T, not before.
func TestSharedResvPeerGone(t *testing.T) {
	clock, a, ea, b, _ := resvPair(t)
	b.tick() // then it stops
	took := timedChange(t, clock, a, ea, "the change still waits for a stopped peer after 10T")
	if took < 2*a.timeout || took > 2*a.timeout+a.period() {
		t.Fatalf("the change completed after %v without the peer; want 2T (%v)", took, 2*a.timeout)
	}
}

// TestSharedResvPeerStopped: a peer that stopped serving the namespace
// cleanly (Close) lets a change complete at once, without the 2T wait.
func TestSharedResvPeerStopped(t *testing.T) {
	clock, a, ea, b, _ := resvPair(t)
	b.tick()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if took := timedChange(t, clock, a, ea, "the change still waits for a peer that stopped cleanly after 10T"); took >= a.timeout {
		t.Fatalf("the change took %v after the peer stopped cleanly; want no wait", took)
	}
}

// TestSharedResvRestartedPeer: a daemon that starts again clears its
// clean stop before it reads the record to serve, so a change written
// after that read waits until it enforces the change.
func TestSharedResvRestartedPeer(t *testing.T) {
	clock, a, ea, b, _ := resvPair(t)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, eb2 := resvDaemon(t, b.name, 1, clock, time.Second) // has read the record
	clock.onSleep = func() { settle(b2) }
	timedChange(t, clock, a, ea, "the change still waits after 10T for a restarted peer that refreshes")
	if st := eb2.state(); len(st.Registrants) != 1 {
		t.Fatalf("the restarted peer enforces %+v once the change completed; want the change", st)
	}
}

// TestSharedResvUnavailable: a daemon whose reads of the record fail
// for T turns the namespace away, not before, and serves it again once a
// read succeeds.
func TestSharedResvUnavailable(t *testing.T) {
	_, clock, a, ea := resvAlone(t)
	dev := &failingDevice{resvDevice: a.dev}
	a.dev = dev
	a.tick()
	dev.fail.Store(true)
	for range 3 {
		clock.advance(a.period())
		a.tick()
		a.watch()
		if ea.ReservationUnavailable() {
			t.Fatalf("unavailable %v after the reads began to fail; want T", 3*a.period())
		}
	}
	clock.advance(a.period())
	a.tick()
	a.watch()
	if !ea.ReservationUnavailable() {
		t.Fatal("still available after T of failed reads")
	}
	dev.fail.Store(false)
	clock.advance(a.period())
	a.tick()
	a.watch()
	if ea.ReservationUnavailable() {
		t.Fatal("still unavailable after a read succeeded")
	}
	// A read that never returns holds up the refresher, not the watch.
	clock.advance(a.timeout)
	a.watch()
	if !ea.ReservationUnavailable() {
		t.Fatal("still available after T without a refresh")
	}
}

// TestSharedResvCorrupt: a record that fails its checksum, and an area
// holding something else, are errors, never an empty state.
func TestSharedResvCorrupt(t *testing.T) {
	path, _, a, ea := resvAlone(t)
	if err := ea.change(register(1, 0xa)); err != nil {
		t.Fatal(err)
	}
	f := openResvArea(t, path)
	// A flipped bit in the registrant's key.
	at := a.base + resvRecordHead + 16
	flip := func() {
		b := []byte{0}
		if _, err := f.ReadAt(b, at); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 1
		if _, err := f.WriteAt(b, at); err != nil {
			t.Fatal(err)
		}
	}
	flip()
	if st, err := a.Load(); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("a corrupt record loaded as %+v, %v", st, err)
	}
	if _, _, err := a.refresh(); err == nil {
		t.Fatal("a refresh read a corrupt record")
	}
	flip()
	if _, err := a.Load(); err != nil {
		t.Fatalf("the record restored: %v", err)
	}
	// What a device held before shared_reservations was set.
	if _, err := f.WriteAt([]byte("some file system"), a.base); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Load(); err == nil || !strings.Contains(err.Error(), "zero the device's last 1 MiB") {
		t.Fatalf("an area of other data: %v", err)
	}
}

// TestSharedResvTornWrite: a record write torn by a crash (here the
// block of the next record damaged) leaves the record before it whole: a
// daemon starting then serves that one, and the next change writes over
// the torn block.
func TestSharedResvTornWrite(t *testing.T) {
	path, clock, a, ea := resvAlone(t)
	for id := byte(1); id <= 2; id++ {
		if err := ea.change(register(id, 0xa)); err != nil {
			t.Fatal(err)
		}
	}
	f := openResvArea(t, path)
	// Record 3 was being written when its writer died: its first sector
	// made it, the rest did not.
	regs := make([]fabrics.Registrant, 30)
	for i := range regs {
		regs[i] = fabrics.Registrant{HostID: [16]byte{byte(10 + i)}, Key: uint64(100 + i)}
	}
	torn, err := encodeRecord(record{id: recordID{seq: 3, writer: 1}, prev: recordID{seq: 2, writer: 0},
		st: fabrics.ReservationState{Generation: 3, Registrants: regs}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(torn[:512], a.base+int64(recordBlock(3))*resvAreaBlock); err != nil {
		t.Fatal(err)
	}
	_, eb := resvDaemon(t, path, 1, clock, time.Second)
	if st := eb.state(); st.Generation != 2 || len(st.Registrants) != 2 {
		t.Fatalf("a daemon starting after the torn write serves %+v; want record 2 (generation 2, 2 registrants)", st)
	}
	if err := ea.change(register(3, 0xa)); err != nil {
		t.Fatalf("the change after the torn write: %v", err)
	}
	if st, err := a.Load(); err != nil || st.Generation != 3 || len(st.Registrants) != 3 {
		t.Fatalf("the record after the next change: %+v, %v", st, err)
	}
}

// TestSharedResvNeverBack: a record older than the one a daemon enforces
// (the device went back) is overwritten with that one.
func TestSharedResvNeverBack(t *testing.T) {
	path, clock, a, ea := resvAlone(t)
	if err := ea.change(register(1, 0xa)); err != nil {
		t.Fatal(err)
	}
	f := openResvArea(t, path)
	old := make([]byte, resvAreaBlock)
	if _, err := f.ReadAt(old, a.base); err != nil {
		t.Fatal(err)
	}
	if err := ea.change(register(2, 0xb)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(old, a.base); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.refresh(); err != nil {
		t.Fatal(err)
	}
	b, _ := resvDaemon(t, path, 1, clock, time.Second)
	st, err := b.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Registrants) != 2 || b.lastID.seq != 2 {
		t.Fatalf("the record after the device went back to sequence 1 and a refresh: %v, %+v; want sequence 2", b.lastID, st)
	}
}

// TestSharedResvStaleDaemon: a daemon that has not read the peer's change
// does not write over it: its change is computed again on the peer's.
func TestSharedResvStaleDaemon(t *testing.T) {
	path := resvArea(t)
	clock := newTestClock()
	_, ea := resvDaemon(t, path, 0, clock, time.Second)
	b, eb := resvDaemon(t, path, 1, clock, time.Second)
	if err := ea.change(register(1, 0xa)); err != nil { // b is not refreshing
		t.Fatal(err)
	}
	if err := b.Store(fabrics.ReservationState{Generation: 1}); !errors.Is(err, fabrics.ErrReservationChanged) {
		t.Fatalf("a store on a record the daemon has not read: %v; want ErrReservationChanged", err)
	}
	if err := eb.change(register(2, 0xb)); err != nil {
		t.Fatal(err)
	}
	if st := eb.state(); len(st.Registrants) != 2 || st.Generation != 2 {
		t.Fatalf("after both changes: %+v", st)
	}
}

// TestSharedResvLateOverwrite: a record the peer wrote over ours at our
// sequence number, after the last look while waiting for it, is found
// when the record is read back: the change is computed again on it, not
// reported done while the record holds the peer's alone.
func TestSharedResvLateOverwrite(t *testing.T) {
	_, clock, a, ea, writePeer := resvBesidePeer(t)
	// The peer's heartbeat never moves; its record lands on a's last
	// wait, after a's last look at the record.
	wrote := false
	end := clock.Now().Add(2 * a.timeout)
	clock.onSleep = func() {
		if !wrote && !clock.Now().Add(a.period()/5).Before(end) {
			wrote = true
			if err := writePeer(); err != nil {
				t.Error(err)
			}
		}
	}
	changeWithin10T(t, clock, a, ea, register(1, 0xa), "the change still waits after 10T")
	if !wrote {
		t.Fatal("the peer's record was never written")
	}
	wantBothRegistered(t, a, ea, "a")
}

// TestSharedResvOverwritten: the peer wrote its record over ours at our
// sequence number while its own change waits for us to enforce it: ours
// is computed again on the peer's at once, rather than both waiting for
// each other with their heartbeats moving.
func TestSharedResvOverwritten(t *testing.T) {
	path, clock, a, ea, writePeer := resvBesidePeer(t)
	b, eb := resvDaemon(t, path, 1, clock, time.Second)
	eb.mu.Lock() // b's change waits for a to enforce its record
	wrote, bDone := false, false
	clock.onSleep = func() {
		if !wrote {
			wrote = true
			if err := writePeer(); err != nil {
				t.Error(err)
			}
		}
		settle(a)
		a.mu.Lock()
		enforced := a.enforced
		a.mu.Unlock()
		if !bDone && enforced == (recordID{seq: 1, writer: 1}) {
			bDone = true
			eb.mu.Unlock()
		}
		settle(b)
	}
	changeWithin10T(t, clock, a, ea, register(1, 0xa), "a's change and b's still wait for each other after 10T")
	wantBothRegistered(t, a, eb, "b")
}

// TestSharedResvSameSlot: two daemons given one slot find each other's
// heartbeat in their block and fail their refreshes, naming the field,
// rather than each taking the other for stopped; a restarted daemon goes
// on from its own count.
func TestSharedResvSameSlot(t *testing.T) {
	path, clock, a, _ := resvAlone(t)
	for range 3 {
		if _, _, err := a.refresh(); err != nil {
			t.Fatal(err)
		}
	}
	at := a.beats // its opening beat and 3 refreshes
	restarted, _ := resvDaemon(t, path, 0, clock, time.Second)
	if _, _, err := restarted.refresh(); err != nil {
		t.Fatalf("a restarted daemon's refresh: %v", err)
	}
	if restarted.beats != at+2 {
		t.Fatalf("heartbeat count %d after a restart at %d, its opening beat and a refresh; want %d", restarted.beats, at, at+2)
	}
	// a still runs too: both are slot 0.
	_, _, err := a.refresh()
	if err == nil || !strings.Contains(err.Error(), "shared_reservations.slot") {
		t.Fatalf("a refresh with another daemon on slot 0: %v", err)
	}
}

// TestSharedResvEnforcedBeat: the heartbeat reports the peer's record only
// once the namespace has fenced for it (Enforced), not once it has loaded
// it: the peer's change would otherwise complete while a write of a host
// it took access from can still land here.
func TestSharedResvEnforcedBeat(t *testing.T) {
	_, _, a, ea, writePeer := resvBesidePeer(t)
	if err := writePeer(); err != nil {
		t.Fatal(err)
	}
	reached, release := ea.holdFence(t)
	tickWithin(t, a) // starts the reload
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the refresh did not reload the peer's record within 10 s")
	}
	a.tick()
	if hb := heartbeatOf(t, a); hb.applied != (recordID{}) {
		t.Fatalf("the heartbeat reports record %v while the namespace still fences for it; want the record before, %v", hb.applied, recordID{})
	}
	release()
	a.reloads.Wait()
	a.tick()
	if hb, want := heartbeatOf(t, a), (recordID{seq: 1, writer: 1}); hb.applied != want {
		t.Fatalf("the heartbeat reports record %v once the namespace enforces %v", hb.applied, want)
	}
}

// TestSharedResvBeatsWhileFencing: while b's namespace fences for a's
// change (a write of a host that lost access is still in the backend),
// b's heartbeat goes on with the record before: a's change waits past 2T
// rather than counting b gone, and completes once the fence is over.
func TestSharedResvBeatsWhileFencing(t *testing.T) {
	clock, a, ea, b, eb := resvPair(t)
	_, release := eb.holdFence(t)
	end := clock.Now().Add(4 * a.timeout)
	past, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	clock.onSleep = func() {
		b.tick()
		if !clock.Now().Before(end) {
			once.Do(func() { close(past); <-resume })
		}
	}
	done := make(chan error, 1)
	go func() { done <- ea.change(register(1, 0xa)) }()
	select {
	case <-past:
	case err := <-done:
		t.Fatalf("a's change completed (%v) while b still fenced for it", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a's change made no progress for 10 s: b's refresh waits for its reload's fence, and its heartbeat stopped")
	}
	if hb := heartbeatOf(t, b); hb.applied != (recordID{}) {
		t.Fatalf("b's heartbeat reports record %v while b still fences for it", hb.applied)
	}
	release()
	b.reloads.Wait()
	close(resume)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a's change still waits 10 s after b's fence ended")
	}
	if st := eb.state(); len(st.Registrants) != 1 {
		t.Fatalf("b enforces %+v once a's change completed", st)
	}
}

// TestSharedResvUnenforcedRefresh: refreshes that read the peer's record
// while a change holds the namespace, so that it cannot reload it, count
// as failed: no lease, and the watcher turns the namespace away T after
// the last refresh whose record it enforced. Once it enforces the record,
// a refresh serves it again.
func TestSharedResvUnenforcedRefresh(t *testing.T) {
	_, clock, a, ea, writePeer := resvBesidePeer(t)
	a.tick()
	lease := ea.leaseEnd()
	if err := writePeer(); err != nil {
		t.Fatal(err)
	}
	ea.mu.Lock() // a change computes on the state before
	for range 4 {
		clock.advance(a.period())
		settle(a)
		a.watch()
	}
	if !ea.ReservationUnavailable() {
		t.Fatal("serving T after the last refresh whose record the namespace enforced: refreshes that could not reload the peer's record counted")
	}
	if got := ea.leaseEnd(); !got.Equal(lease) {
		t.Fatalf("refreshes of a record the namespace does not enforce renewed the lease to %v; want %v", got, lease)
	}
	ea.mu.Unlock()
	clock.advance(a.period())
	settle(a) // reloads
	settle(a)
	if ea.ReservationUnavailable() {
		t.Fatal("still unavailable once the namespace enforces the peer's record")
	}
	if got, want := ea.leaseEnd(), clock.Now().Add(a.timeout); !got.Equal(want) {
		t.Fatalf("lease until %v once the namespace enforces the peer's record; want %v", got, want)
	}
}

// TestSharedResvClockStep: the wall clock set back does not keep a daemon
// whose refreshes stopped serving, nor does setting it forward turn away
// one that refreshes: the watcher measures T on a clock that never steps.
func TestSharedResvClockStep(t *testing.T) {
	for _, tc := range []struct {
		name        string
		step        time.Duration
		after       time.Duration // since the last refresh
		unavailable bool
	}{
		{"set back", -time.Hour, time.Second, true},
		{"set forward", time.Hour, time.Second / 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newTestClock()
			a, ea := resvDaemon(t, resvArea(t), 0, clock, time.Second)
			a.tick()
			clock.stepWall(tc.step)
			clock.advance(tc.after)
			a.watch()
			if got := ea.ReservationUnavailable(); got != tc.unavailable {
				t.Fatalf("unavailable %v %v after the last refresh, the wall clock %s an hour meanwhile; want %v", got, tc.after, tc.name, tc.unavailable)
			}
		})
	}
}

// TestSharedResvLease: the namespace's lease runs T from the start of the
// last read of a record it enforces, from the start on, and ends before a
// change the peer writes after that read completes without this daemon
// (its heartbeat stood still for 2T): a daemon paused past it turns I/O
// away as soon as it resumes, before its watcher runs.
func TestSharedResvLease(t *testing.T) {
	clock, a, ea, b, eb := resvPair(t)
	if got, want := eb.leaseEnd(), clock.Now().Add(b.timeout); !got.Equal(want) {
		t.Fatalf("lease at start until %v; want %v, T after the record was read", got, want)
	}
	clock.advance(b.period())
	read := clock.Now()
	b.tick()
	if got, want := eb.leaseEnd(), read.Add(b.timeout); !got.Equal(want) {
		t.Fatalf("lease after a refresh until %v; want %v, T after its read began", got, want)
	}
	// b pauses; a's change completes without it.
	timedChange(t, clock, a, ea, "the change still waits for a paused peer after 10T")
	if end, done := eb.leaseEnd(), clock.Now(); !end.Before(done) {
		t.Fatalf("b's lease ends at %v, not before a's change completed without it at %v", end, done)
	}
}

// TestSharedResvOwnChangeServes: while a's change waits 2T for a peer
// that stopped, a's refreshes read a's own record, which its namespace
// fenced for before storing: they count, and the namespace goes on
// serving.
func TestSharedResvOwnChangeServes(t *testing.T) {
	clock, a, ea, b, _ := resvPair(t)
	b.tick() // then it stops
	clock.onSleep = func() {
		settle(a)
		a.watch()
	}
	timedChange(t, clock, a, ea, "the change still waits for a stopped peer after 10T")
	if ea.ReservationUnavailable() {
		t.Fatal("a turned its namespace away while its own change waited for a stopped peer")
	}
	if end := ea.leaseEnd(); end.Before(clock.Now()) {
		t.Fatalf("a's lease ended at %v, while its own change waited (now %v)", end, clock.Now())
	}
}
