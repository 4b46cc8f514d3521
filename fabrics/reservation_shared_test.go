package fabrics

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// sharedMedium is the state two daemons share, with a version that every
// store bumps: what a shared device's record or an image's metadata is.
type sharedMedium struct {
	mu      sync.Mutex
	state   ReservationState
	version uint64
	stores  int
}

// sharedView is one daemon's store on the medium: Store is a
// compare-and-set on the version this daemon last saw.
type sharedView struct {
	m    *sharedMedium
	seen uint64
	// changedTimes makes that many Stores fail as if another daemon had
	// just changed the state.
	changedTimes int
}

func (v *sharedView) SharedReservations() {}

func (v *sharedView) Load() (ReservationState, error) {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	v.seen = v.m.version
	s := v.m.state
	s.Registrants = slices.Clone(s.Registrants)
	return s, nil
}

func (v *sharedView) Store(s ReservationState) error {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	if v.changedTimes > 0 {
		v.changedTimes--
		v.m.version++
	}
	if v.m.version != v.seen {
		return fmt.Errorf("version %d, last seen %d: %w", v.m.version, v.seen, ErrReservationChanged)
	}
	v.m.version++
	v.seen = v.m.version
	v.m.stores++
	v.m.state = s
	v.m.state.Registrants = slices.Clone(s.Registrants)
	return nil
}

// TestResvSharedStore: two daemons on one shared store enforce one state,
// whichever of them a change went through.
func TestResvSharedStore(t *testing.T) {
	m := &sharedMedium{}
	tg1, p1 := restartWith(t, &sharedView{m: m})
	v2 := &sharedView{m: m}
	tg2, p2 := restartWith(t, v2)
	a1, b2 := resvHost(t, tg1, p1, 1), resvHost(t, tg2, p2, 2)
	blk := make([]byte, 512)

	// Without PTPL: a shared store keeps every change.
	must(t, "a registers through daemon 1", a1.resvRegister(nvme.ResvRegister, false, 0, 0, 0xa))
	if m.stores != 1 {
		t.Fatalf("%d stores after a registration without PTPL; want 1", m.stores)
	}
	must(t, "a acquires write exclusive through daemon 1", a1.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 0xa, 0))

	// Daemon 2 has not reloaded: b's registration is computed on the old
	// state, refused by the store, and computed again on the new one.
	must(t, "b registers through daemon 2", b2.resvRegister(nvme.ResvRegister, false, 0, 0, 0xb))
	s, _ := b2.resvReport(4096, true)
	if s.Type != nvme.ResvWriteExclusive || len(s.Registrants) != 2 {
		t.Fatalf("daemon 2 after its change: %+v; want a's reservation and both registrants", s)
	}
	wantStatus(t, "b's write through daemon 2", b2.rw(nvme.IOWrite, 1, 0, 1, blk, false), conflict)

	// Daemon 1 learns b's registration when it reloads (a takeover, a refresh).
	if err := tg1.Subsystem(testNQN).Namespace(1).ReloadReservation(); err != nil {
		t.Fatal(err)
	}
	if s, _ := a1.resvReport(4096, true); len(s.Registrants) != 2 {
		t.Fatalf("daemon 1 after reload: %+v", s)
	}

	// A restart of daemon 2 is not a power loss: no PTPL, and the state stays.
	tg3, p3 := restartWith(t, &sharedView{m: m})
	b3 := resvHost(t, tg3, p3, 2)
	wantStatus(t, "b's write through a restarted daemon 2", b3.rw(nvme.IOWrite, 1, 0, 1, blk, false), conflict)

	// A state that keeps changing under the command interrupts it; the
	// host retries.
	v2.changedTimes = resvChangeAttempts
	wantStatus(t, "b's release under constant change", b2.resvRegister(nvme.ResvUnregister, false, 0, 0xb, 0), nvme.StatusCommandInterrupted)
	v2.changedTimes = 0
	must(t, "b unregisters on retry", b2.resvRegister(nvme.ResvUnregister, false, 0, 0xb, 0))
	if st, _ := (&sharedView{m: m}).Load(); len(st.Registrants) != 1 || st.Type != nvme.ResvWriteExclusive {
		t.Fatalf("stored after b's unregister: %+v", st)
	}
}

// TestResvUnavailable: a namespace whose shared state cannot be read
// turns I/O and reservation commands away with a path error, through
// whatever publishes meanwhile, until it is available again. Its ANA
// group reads inaccessible meanwhile, and each flip raises an ANA change
// event, so the host moves to another path rather than retrying this one.
func TestResvUnavailable(t *testing.T) {
	m := &sharedMedium{}
	tg, p := restartWith(t, &sharedView{m: m})
	a := resvHost(t, tg, p, 1)
	ns := tg.Subsystem(testNQN).Namespace(1)
	blk := make([]byte, 512)
	must(t, "a registers", a.resvRegister(nvme.ResvRegister, false, 0, 0, 0xa))
	anaEvent := uint64(nvme.AsyncEventResult(nvme.AsyncTypeNotice, nvme.AsyncNoticeANAChange, nvme.LogANA))
	groupState := func() nvme.ANAState {
		t.Helper()
		l := a.readANALog()
		if len(l.Groups) != 1 {
			t.Fatalf("ANA log groups: %+v", l.Groups)
		}
		return l.Groups[0].State
	}
	// wantEvent fails rather than hangs when no event comes.
	wantEvent := func(when string, aer <-chan nvme.Completion) {
		t.Helper()
		select {
		case rsp := <-aer:
			if rsp == nil || rsp.Status() != 0 || rsp.Result() != anaEvent {
				t.Fatalf("AER %s: %v, want result %#x", when, rsp, anaEvent)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no ANA change event within 10 s %s", when)
		}
	}
	aer := enableAEN(t, a, nvme.OAESANAChange)

	ns.SetReservationUnavailable(true)
	wantEvent("after the namespace turned unavailable", aer)
	if st := groupState(); st != nvme.ANAInaccessible {
		t.Fatalf("ANA group state while unavailable: %v, want inaccessible", st)
	}
	wantStatus(t, "a write while unavailable", a.rw(nvme.IOWrite, 1, 0, 1, blk, false), nvme.StatusANAInaccessible)
	wantStatus(t, "a read while unavailable", a.rw(nvme.IORead, 1, 0, 1, blk, false), nvme.StatusANAInaccessible)
	wantStatus(t, "an acquire while unavailable", a.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 0xa, 0), nvme.StatusANAInaccessible)
	// A reload publishes a new snapshot: the switch stays.
	if err := ns.ReloadReservation(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "a write after a reload while unavailable", a.rw(nvme.IOWrite, 1, 0, 1, blk, false), nvme.StatusANAInaccessible)

	aer = a.admin.SubmitAsync(newCmd(nvme.AdminAsyncEvent), nil)
	ns.SetReservationUnavailable(false)
	wantEvent("after the namespace turned available", aer)
	if st := groupState(); st != nvme.ANAOptimized {
		t.Fatalf("ANA group state once available: %v, want optimized", st)
	}
	must(t, "a write once available", a.rw(nvme.IOWrite, 1, 0, 1, blk, false))
	must(t, "an acquire once available", a.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 0xa, 0))
	if ns.ReservationUnavailable() {
		t.Fatal("ReservationUnavailable after it was turned off")
	}
}

// TestResvTryReload: a refresher's reload passes over a namespace whose
// reservation change is running (it may wait on the other daemon), and
// publishes the stored state otherwise.
func TestResvTryReload(t *testing.T) {
	m := &sharedMedium{}
	tg, _ := restartWith(t, &sharedView{m: m})
	ns := tg.Subsystem(testNQN).Namespace(1)
	other := &sharedView{m: m}
	other.Load()
	if err := other.Store(ReservationState{Generation: 7}); err != nil {
		t.Fatal(err)
	}
	ns.resv.mu.Lock() // a change in progress
	done := make(chan bool, 1)
	go func() {
		ok, err := ns.TryReloadReservation()
		if err != nil {
			t.Error(err)
		}
		done <- ok
	}()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("reloaded while a change held the mutex")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("TryReloadReservation waits behind a change")
	}
	ns.resv.mu.Unlock()
	if ok, err := ns.TryReloadReservation(); !ok || err != nil {
		t.Fatalf("reload without a change: %v, %v", ok, err)
	}
	if g := ns.Reservation().Generation; g != 7 {
		t.Fatalf("generation %d after the reload; want 7", g)
	}
}

// landedWrites records that a write it let through reached the medium.
type landedWrites struct {
	*gatedWrites
	landed atomic.Bool
}

func (l *landedWrites) WriteAt(p []byte, off int64) error {
	err := l.gatedWrites.WriteAt(p, off)
	l.landed.Store(true)
	return err
}

// preemptedElsewhere sets up two daemons on one shared state: host 1
// holds Write Exclusive through daemon A and has a write in A's gated
// backend when host 2 preempts it through daemon B. It returns A's
// namespace, the write's completion and its backend.
func preemptedElsewhere(t *testing.T) (*Namespace, <-chan nvme.Completion, *landedWrites, *host) {
	t.Helper()
	m := &sharedMedium{}
	g := &landedWrites{gatedWrites: newGatedWrites()}
	tgA, pA := targetWith(t, g)
	nsA := tgA.Subsystem(testNQN).Namespace(1)
	if err := nsA.SetReservationStore(&sharedView{m: m}); err != nil {
		t.Fatal(err)
	}
	tgB, pB := restartWith(t, &sharedView{m: m})
	h1, h2 := resvHost(t, tgA, pA, 1), resvHost(t, tgB, pB, 2)
	must(t, "host 1 registers through A", h1.resvRegister(nvme.ResvRegister, false, 0, 0, 0xa))
	must(t, "host 1 acquires write exclusive through A", h1.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 0xa, 0))
	must(t, "host 2 registers through B", h2.resvRegister(nvme.ResvRegister, false, 0, 0, 0xb))
	w := keyed(newCmd(nvme.IOWrite), 512)
	w.SetNSID(1)
	w.SetCID(100)
	inflight := h1.io.SubmitAsync(w, make([]byte, 512))
	<-g.entered
	must(t, "host 2 preempts host 1 through B", h2.resvAcquire(nvme.ResvPreempt, nvme.ResvWriteExclusive, 0xb, 0xa))
	return nsA, inflight, g, h1
}

// TestResvSharedReloadFences: when a daemon learns that another one took
// a host's access away, its reload (after which its heartbeat tells the
// other daemon it enforces the change) waits for that host's commands in
// flight here: none lands after the other daemon's change completes.
func TestResvSharedReloadFences(t *testing.T) {
	nsA, inflight, g, h1 := preemptedElsewhere(t)
	var once sync.Once
	open := func() { once.Do(func() { close(g.release) }) }
	t.Cleanup(open)
	type result struct {
		err    error
		landed bool
	}
	done := make(chan result, 1)
	go func() {
		err := nsA.ReloadReservation()
		done <- result{err, g.landed.Load()}
	}()
	// The new state is published before the fence waits.
	for nsA.Reservation().Holder != [16]byte{2} {
	}
	open()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.landed {
		t.Fatal("A's reload returned while host 1's write, admitted under the old state, was still in the backend")
	}
	// The shared record does not say whether the other daemon's preempt
	// aborted: a write fenced here reports that it was.
	if rsp := <-inflight; rsp.Status() != nvme.StatusPreemptAborted|nvme.DNR {
		t.Fatalf("host 1's write admitted before the preempt: %v, want Command Aborted due to Preempt and Abort", rsp.Status())
	}
	blk := make([]byte, 512)
	wantStatus(t, "host 1's next write through A", h1.rw(nvme.IOWrite, 1, 0, 1, blk, false), conflict)
}

// TestResvSharedReloadFenceTimeout: a command that does not leave the
// backend in time is warned of, and the reload goes on waiting for it:
// the store hears the new state is enforced (and the heartbeat may say
// so) only once that write is out.
func TestResvSharedReloadFenceTimeout(t *testing.T) {
	old := fenceTimeout
	fenceTimeout = 20 * time.Millisecond
	t.Cleanup(func() { fenceTimeout = old })
	nsA, _, g, _ := preemptedElsewhere(t)
	var once sync.Once
	open := func() { once.Do(func() { close(g.release) }) }
	t.Cleanup(open)
	v := &enforcingView{sharedView: nsA.resv.store.(*sharedView), landed: &g.landed}
	nsA.resv.store = v
	logger, hook := logtest.NewNullLogger()
	nsA.subsystem.Load().target.Log = logrus.NewEntry(logger)
	done := make(chan error, 1)
	go func() { done <- nsA.ReloadReservation() }()
	warned := func() bool {
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "has not left the backend in time") {
				return true
			}
		}
		return false
	}
	for !warned() {
		select {
		case err := <-done:
			t.Fatalf("the reload returned (%v) with the write still in the backend, before warning of it", err)
		case <-time.After(time.Millisecond):
		}
	}
	if v.enforced.Load() != 0 || g.landed.Load() {
		t.Fatalf("the store heard the state is enforced (%d) or the gated write landed (%t) while it is in the backend", v.enforced.Load(), g.landed.Load())
	}
	open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v.enforced.Load() != 1 || v.early.Load() {
		t.Fatalf("enforced %d times, before the write landed: %t; want once, after", v.enforced.Load(), v.early.Load())
	}
}

// enforcingView is a sharedView that counts the namespace's Enforced
// calls, and whether one came before the gated write landed.
type enforcingView struct {
	*sharedView
	landed   *atomic.Bool
	enforced atomic.Int32
	early    atomic.Bool
}

func (v *enforcingView) Enforced() {
	v.enforced.Add(1)
	if !v.landed.Load() {
		v.early.Store(true)
	}
}
