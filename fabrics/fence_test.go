package fabrics

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// The fence (fence.go), as one table: every change that takes write access
// from host A, against every place A's write can wait. Host B then writes
// the same block, and it must read back B's data: no write A had admitted
// under the old rule lands after the change completed.
//
// Places:
//   - qos: A's write waits on the namespace's QoS limit. The change ends
//     it with the new rule's status at once, and it never lands.
//   - worker: A's write is in a blocking backend, on a queue worker;
//   - async: in an asynchronous backend, not yet confirmed;
//   - closing: in the backend, and A's controller is gone (its queues
//     are closing): a host that died with a write in flight.
//     In these three the change does not complete before the write is
//     out of the backend.
func TestFenceEveryChangeEveryPlace(t *testing.T) {
	for _, ch := range fenceChanges {
		for _, place := range []string{"qos", "worker", "async", "closing"} {
			t.Run(ch.name+"/"+place, func(t *testing.T) {
				runFence(t, ch, place)
			})
		}
	}
}

// fenceChange is one change that takes write access from host A.
type fenceChange struct {
	name string
	// setup prepares the state before A writes; A must be allowed to.
	setup func(r *fenceRig)
	// change makes the change; nil is success.
	change func(r *fenceRig) error
	// waiting is the status A's write waiting on the QoS limit completes
	// with.
	waiting nvme.Status
	// bWrites: B may write after the change (not when the path is gone).
	bWrites bool
}

var (
	fenceA, fenceB = [16]byte{1}, [16]byte{2}
	conflictDNR    = nvme.StatusReservationConflict | nvme.DNR
)

// aHoldsWE: A holds Write Exclusive, B is registered.
func aHoldsWE(r *fenceRig) {
	must(r.t, "a registers", r.a.resvRegister(nvme.ResvRegister, false, 0, 0, 0xa))
	must(r.t, "a acquires", r.a.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 0xa, 0))
	must(r.t, "b registers", r.b.resvRegister(nvme.ResvRegister, false, 0, 0, 0xb))
}

// bHoldsWE is the state where B holds Write Exclusive and A is gone.
var bHoldsWE = ReservationState{Generation: 9, Type: nvme.ResvWriteExclusive, Holder: fenceB, PTPL: true,
	Registrants: []Registrant{{fenceB, 0xb}}}

func resvStatus(st nvme.Status) error {
	if st != 0 {
		return fmt.Errorf("status %v", st)
	}
	return nil
}

var fenceChanges = []fenceChange{
	{name: "preempt-and-abort", setup: aHoldsWE, waiting: nvme.StatusPreemptAborted | nvme.DNR, bWrites: true,
		change: func(r *fenceRig) error {
			return resvStatus(r.b.resvAcquire(nvme.ResvPreemptAndAbort, nvme.ResvWriteExclusive, 0xb, 0xa))
		}},
	{name: "preempt", setup: aHoldsWE, waiting: conflictDNR, bWrites: true,
		change: func(r *fenceRig) error {
			return resvStatus(r.b.resvAcquire(nvme.ResvPreempt, nvme.ResvWriteExclusive, 0xb, 0xa))
		}},
	{name: "acquire-registrants-only", waiting: conflictDNR, bWrites: true,
		setup: func(r *fenceRig) {
			// A writes as a registrant; B's Write Exclusive Registrants
			// Only, after B unregistered A's key (Preempt without a
			// reservation), leaves A out.
			must(r.t, "a registers", r.a.resvRegister(nvme.ResvRegister, false, 0, 0, 0xa))
			must(r.t, "b registers", r.b.resvRegister(nvme.ResvRegister, false, 0, 0, 0xb))
			must(r.t, "b acquires", r.b.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusiveRegOnly, 0xb, 0))
		},
		change: func(r *fenceRig) error {
			return resvStatus(r.b.resvAcquire(nvme.ResvPreempt, nvme.ResvWriteExclusiveRegOnly, 0xb, 0xa))
		}},
	{name: "hide", waiting: nvme.StatusInvalidNamespace | nvme.DNR, bWrites: true,
		change: func(r *fenceRig) error { return r.s.SetNamespaceHosts(1, []string{fenceHostNQN(2)}) }},
	{name: "ana-inaccessible", waiting: nvme.StatusANAInaccessible,
		change: func(r *fenceRig) error {
			return r.tg.SetANAStates(r.p.ID, map[uint32]nvme.ANAState{1: nvme.ANAInaccessible})
		}},
	{name: "reservations-on-again", waiting: conflictDNR, bWrites: true,
		setup: func(r *fenceRig) {
			// The store holds B's reservation, which persists; with
			// reservations off, A writes.
			st := &memStore{state: bHoldsWE}
			if err := r.ns.SetReservationStore(st); err != nil {
				r.t.Fatal(err)
			}
			if err := r.ns.SetReservations(false); err != nil {
				r.t.Fatal(err)
			}
		},
		change: func(r *fenceRig) error { return r.ns.SetReservations(true) }},
	{name: "other-daemon", waiting: nvme.StatusPreemptAborted | nvme.DNR, bWrites: true,
		setup: func(r *fenceRig) {
			m := &sharedMedium{state: ReservationState{Generation: 3, Type: nvme.ResvWriteExclusive, Holder: fenceA,
				Registrants: []Registrant{{fenceA, 0xa}, {fenceB, 0xb}}}}
			if err := r.ns.SetReservationStore(&sharedView{m: m}); err != nil {
				r.t.Fatal(err)
			}
			r.medium = m
		},
		change: func(r *fenceRig) error {
			// The other daemon preempted A: its record, which this
			// daemon reads at its next refresh.
			r.medium.mu.Lock()
			r.medium.state, r.medium.version = bHoldsWE, r.medium.version+1
			r.medium.mu.Unlock()
			return r.ns.ReloadReservation()
		}},
}

func fenceHostNQN(id byte) string {
	return fmt.Sprintf("nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000%02x", id)
}

// fenceRig is a target whose namespace 1 can hold writes in its backend,
// with hosts A (ID 1) and B (ID 2), each with a controller of its own.
type fenceRig struct {
	t      *testing.T
	tg     *Target
	p      *Port
	s      *Subsystem
	ns     *Namespace
	a, b   *host
	mem    *fenceBackend
	medium *sharedMedium
	seq    atomic.Int64 // orders landings and completions
}

// fenceBackend logs each write's first byte with the rig's sequence
// number, and holds the first write of 0xaa while holding is set. It is
// a blocking backend (its writes run on the queue's workers); asyncFence
// is the same as an asynchronous one.
type fenceBackend struct {
	*memBackend
	r       *fenceRig
	async   bool
	mu      sync.Mutex
	landed  []fenceLanding
	entered chan struct{}
	release chan struct{}
	holding bool
}

type fenceLanding struct {
	b   byte
	seq int64
}

// holds reports whether the write of p is the one to hold.
func (f *fenceBackend) holds(p []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	hold := f.holding && p[0] == 0xaa
	f.holding = f.holding && !hold
	return hold
}

func (f *fenceBackend) WriteAt(p []byte, off int64) error {
	if !f.async && f.holds(p) {
		f.entered <- struct{}{}
		<-f.release
	}
	err := f.memBackend.WriteAt(p, off)
	f.mu.Lock()
	f.landed = append(f.landed, fenceLanding{p[0], f.r.seq.Add(1)})
	f.mu.Unlock()
	return err
}

// aLanded is when A's write landed, or 0.
func (f *fenceBackend) aLanded() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.landed {
		if l.b == 0xaa {
			return l.seq
		}
	}
	return 0
}

// asyncFence holds A's asynchronous write, unconfirmed, until release.
type asyncFence struct{ *fenceBackend }

func (a asyncFence) ReadAsync(p []byte, off int64, sink *backend.AsyncSink, tag uint32) error {
	go func() { a.ReadAt(p, off); sink.Done(tag, int64(len(p))) }()
	return nil
}

func (a asyncFence) WriteAsync(p []byte, off int64, sink *backend.AsyncSink, tag uint32) error {
	hold := a.holds(p)
	if hold {
		a.entered <- struct{}{}
	}
	go func() {
		if hold {
			<-a.release
		}
		a.WriteAt(p, off)
		sink.Done(tag, int64(len(p)))
	}()
	return nil
}

func (a asyncFence) FlushAsync(sink *backend.AsyncSink, tag uint32) error {
	go func() { a.Flush(); sink.Done(tag, 0) }()
	return nil
}

var _ backend.AsyncIO = asyncFence{}

func runFence(t *testing.T, ch fenceChange, place string) {
	r, open := newFenceRig(t, ch, place)
	aWrite := r.startAWrite(place)
	waiting := make(chan struct{}, 16)
	fenceHook = func(*Namespace) { waiting <- struct{}{} }
	t.Cleanup(func() { fenceHook = nil })
	done := make(chan error, 1)
	var completed atomic.Int64
	go func() {
		err := ch.change(r)
		completed.Store(r.seq.Add(1))
		done <- err
	}()
	if place == "qos" {
		r.expectWaitingWriteEnded(ch, done, aWrite)
	} else {
		select {
		case err := <-done:
			t.Fatalf("the change completed (%v) while a's write, admitted under the old rule, was in the backend", err)
		case <-waiting:
		}
		open()
		if err := <-done; err != nil {
			t.Fatalf("the change: %v", err)
		}
		if l := r.mem.aLanded(); l == 0 || l > completed.Load() {
			t.Fatalf("a's write landed at %d, the change completed at %d", l, completed.Load())
		}
	}
	if ch.bWrites {
		must(t, "b's write after the change", r.b.rw(nvme.IOWrite, 1, 0, 1, bytes.Repeat([]byte{0xbb}, 512), false))
	}
	if place != "closing" {
		<-aWrite
	}
	r.a.io.Close() // every command of A's is done
	r.expectBlock0(ch, place)
}

// newFenceRig sets up hosts A and B on a target whose backend holds A's
// write at place, with ch's setup made. open lets the held write go on.
func newFenceRig(t *testing.T, ch fenceChange, place string) (r *fenceRig, open func()) {
	old := fenceTimeout
	fenceTimeout = 5 * time.Second
	t.Cleanup(func() { fenceTimeout = old })
	r = &fenceRig{t: t}
	f := &fenceBackend{memBackend: newMem(1<<20, 512), r: r,
		entered: make(chan struct{}, 1), release: make(chan struct{}), holding: place != "qos", async: place == "async"}
	var once sync.Once
	open = func() { once.Do(func() { close(f.release) }) }
	if place == "async" {
		r.tg, r.p = targetWith(t, asyncFence{f})
	} else {
		r.tg, r.p = targetWith(t, f)
	}
	r.mem, r.s = f, r.tg.Subsystem(testNQN)
	r.ns = r.s.Namespace(1)
	r.a, r.b = resvHost(t, r.tg, r.p, 1), resvHost(t, r.tg, r.p, 2)
	// After the hosts', so that it runs before they close: a failure must
	// not leave the write held, which Close waits for.
	t.Cleanup(open)
	if ch.setup != nil {
		ch.setup(r)
	}
	return r, open
}

// startAWrite submits A's write of 0xaa to block 0 and returns once it is
// held at place: waiting on the QoS limit, or in the backend (and with
// A's controller gone for "closing").
func (r *fenceRig) startAWrite(place string) <-chan nvme.Completion {
	t := r.t
	blk := make([]byte, 512)
	if place == "qos" {
		// A manual clock that never moves: what waits, waits.
		r.tg.SetClock(&ManualClock{})
		if err := r.s.SetQoS(1, QoSLimits{IOPS: 1}); err != nil {
			t.Fatal(err)
		}
		must(t, "b's read takes the limit's one token", r.b.rw(nvme.IORead, 1, 0, 1, blk, false))
	}
	aWrite := r.a.io.SubmitAsync(ioCmd(nvme.IOWrite, 1, 0, 1, 512), bytes.Repeat([]byte{0xaa}, 512))
	if place == "qos" {
		for r.ns.QoSStats().Waiting != 1 {
			select {
			case rsp := <-aWrite:
				t.Fatalf("a's write completed (%v) instead of waiting on the limit", rsp.Status())
			case <-time.After(time.Millisecond):
			}
		}
	} else {
		<-r.mem.entered
	}
	if place == "closing" {
		// A dies: its controller goes (keep alive expired, or the
		// transport closed its queues), its write still in the backend.
		go r.a.io.Close()
		go r.a.admin.Close()
		for slices.ContainsFunc(r.s.Controllers(), func(c *Controller) bool { return c.HostID == fenceA }) {
			time.Sleep(time.Millisecond)
		}
	}
	return aWrite
}

// expectWaitingWriteEnded checks that the change completes without
// waiting for A's write on the QoS limit, and ends that write with
// ch.waiting.
func (r *fenceRig) expectWaitingWriteEnded(ch fenceChange, done <-chan error, aWrite <-chan nvme.Completion) {
	t := r.t
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the change failed with a write waiting on the QoS limit: %v", err)
		}
	case <-time.After(2 * fenceTimeout):
		t.Fatal("the change waits for a write waiting on the QoS limit")
	}
	select {
	case rsp := <-aWrite:
		if rsp.Status() != ch.waiting {
			t.Fatalf("a's waiting write completed with %v, want %v", rsp.Status(), ch.waiting)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("a's write still waits on the limit 10 s after the change completed (want it ended with %v)", ch.waiting)
	}
	if n := r.ns.QoSStats().Waiting; n != 0 {
		t.Fatalf("%d still wait on the limit", n)
	}
	// Nothing of A's may be left to run: lift the limit.
	if err := r.s.SetQoS(1, QoSLimits{}); err != nil {
		t.Fatal(err)
	}
}

// expectBlock0 checks what block 0 holds once all is done: B's write if it
// wrote, else A's unless the change ended it waiting on the QoS limit.
func (r *fenceRig) expectBlock0(ch fenceChange, place string) {
	t, f := r.t, r.mem
	got := make([]byte, 512)
	f.ReadAt(got, 0)
	want := byte(0)
	switch {
	case ch.bWrites:
		want = 0xbb
	case place != "qos":
		want = 0xaa // it landed before the change completed
	}
	if got[0] != want || !bytes.Equal(got, bytes.Repeat(got[:1], 512)) {
		t.Fatalf("block 0 holds %#x..., want all %#x", got[0], want)
	}
	if place == "qos" && f.aLanded() != 0 {
		t.Fatal("a's write, ended by the change, landed")
	}
}

// gatedReads holds the reads of a memBackend until release while holding.
type gatedReads struct {
	*memBackend
	holding atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedReads) ReadAt(p []byte, off int64) error {
	if g.holding.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.memBackend.ReadAt(p, off)
}

// Command Aborted due to Preempt and Abort is the status of commands that
// were in flight on the namespace when their host was preempted with
// abort, and of no other: not of a reservation command, nor of a command
// that failed before the reservation check, nor of a former preemptee
// that registered again, with Replace ignoring the key, when a later
// Preempt and Abort names another host.
func TestResvAbortStatusOnlyForFencedCommands(t *testing.T) {
	g := &gatedReads{memBackend: newMem(1<<20, 512), entered: make(chan struct{}, 1), release: make(chan struct{})}
	tg, p := targetWith(t, g)
	a, b, c := resvHost(t, tg, p, 1), resvHost(t, tg, p, 2), resvHost(t, tg, p, 3)
	must(t, "a registers", a.resvRegister(nvme.ResvRegister, false, 0, 0, 0xa))
	must(t, "a acquires", a.resvAcquire(nvme.ResvAcquire, nvme.ResvWriteExclusive, 0xa, 0))
	must(t, "b registers", b.resvRegister(nvme.ResvRegister, false, 0, 0, 0xb))
	blk := make([]byte, 512)
	must(t, "a reads", a.rw(nvme.IORead, 1, 0, 1, blk, false))
	must(t, "b preempts and aborts a", b.resvAcquire(nvme.ResvPreemptAndAbort, nvme.ResvWriteExclusive, 0xb, 0xa))
	if _, st := a.resvReport(4096, true); st != 0 {
		t.Fatalf("a's Reservation Report after it was preempted: %v, want success", st)
	}
	wantStatus(t, "a's read past the end", a.rw(nvme.IORead, 1, 1<<20, 1, blk, false), nvme.StatusLBARange|nvme.DNR)
	must(t, "a's read under b's write exclusive", a.rw(nvme.IORead, 1, 0, 1, blk, false))

	// A registers again with Replace ignoring the key; C registers; A's
	// read is in the backend when B preempts and aborts C.
	must(t, "a registers again, replacing ignoring the key", a.resvRegister(nvme.ResvReplace, true, 0, 0, 0xa2))
	must(t, "c registers", c.resvRegister(nvme.ResvRegister, false, 0, 0, 0xc))
	g.holding.Store(true)
	read := a.io.SubmitAsync(ioCmd(nvme.IORead, 1, 0, 1, 512), make([]byte, 512))
	<-g.entered
	g.holding.Store(false)
	must(t, "b preempts and aborts c", b.resvAcquire(nvme.ResvPreemptAndAbort, nvme.ResvWriteExclusive, 0xb, 0xc))
	close(g.release)
	if rsp := <-read; rsp.Status() != 0 {
		t.Fatalf("a's read in flight while c was preempted completed with %v, want success", rsp.Status())
	}
}

// Reservations turned off and on again on a shared store read the stored
// state back and enforce it: the next change builds on the other
// daemons' registrants and holder instead of overwriting them with a
// state that has none.
func TestResvOnAgainReloadsTheStore(t *testing.T) {
	m := &sharedMedium{state: ReservationState{Generation: 5, Type: nvme.ResvWriteExclusive, Holder: fenceB,
		Registrants: []Registrant{{fenceA, 0xa}, {fenceB, 0xb}}}}
	tg, p := restartWith(t, &sharedView{m: m})
	ns := tg.Subsystem(testNQN).Namespace(1)
	c := resvHost(t, tg, p, 3)
	if err := ns.SetReservations(false); err != nil {
		t.Fatal(err)
	}
	if err := ns.SetReservations(true); err != nil {
		t.Fatal(err)
	}
	blk := make([]byte, 512)
	wantStatus(t, "c's write under b's write exclusive, once on again", c.rw(nvme.IOWrite, 1, 0, 1, blk, false), conflictDNR)
	must(t, "c registers", c.resvRegister(nvme.ResvRegister, false, 0, 0, 0xc))
	m.mu.Lock()
	st := m.state
	m.mu.Unlock()
	if st.Type != nvme.ResvWriteExclusive || st.Holder != fenceB || len(st.Registrants) != 3 {
		t.Fatalf("stored after c registered: %+v; want b's write exclusive, a, b and c registered", st)
	}
}

// A Set Features Reservation Persistence (83h) while the shared state
// cannot be read is turned away like a reservation command: a change
// computed on a stale state could undo another daemon's.
func TestResvPersistFeatureWhileUnavailable(t *testing.T) {
	m := &sharedMedium{}
	tg, p := restartWith(t, &sharedView{m: m})
	a := resvHost(t, tg, p, 1)
	must(t, "a registers", a.resvRegister(nvme.ResvRegister, false, 0, 0, 0xa))
	stores := m.stores
	tg.Subsystem(testNQN).Namespace(1).SetReservationUnavailable(true)
	wantStatus(t, "set features 83h while unavailable", a.setFeature(nvme.FeatResvPersist, 1, nvme.ResvPTPL), nvme.StatusANAInaccessible)
	if m.stores != stores {
		t.Fatalf("%d stores while unavailable", m.stores-stores)
	}
}

// Reservation notices follow visibility: none is queued for a namespace
// hidden from the host, and those queued go when it is hidden.
func TestResvNoticeFollowsVisibility(t *testing.T) {
	tg, p := targetWith(t, newMem(1<<20, 512))
	s := tg.Subsystem(testNQN)
	a, b := resvHost(t, tg, p, 1), resvHost(t, tg, p, 2)
	must(t, "a registers", a.resvRegister(nvme.ResvRegister, false, 0, 0, 0xa))
	must(t, "b registers", b.resvRegister(nvme.ResvRegister, false, 0, 0, 0xb))
	must(t, "b preempts a", b.resvAcquire(nvme.ResvPreempt, nvme.ResvWriteExclusive, 0xb, 0xa))
	if err := s.SetNamespaceHosts(1, []string{fenceHostNQN(2)}); err != nil {
		t.Fatal(err)
	}
	if n := a.readResvLog(); n.Type != 0 {
		t.Fatalf("a's notice for a namespace hidden from it: %+v", n)
	}
	if err := s.SetNamespaceHosts(1, nil); err != nil {
		t.Fatal(err)
	}
	must(t, "a registers again", a.resvRegister(nvme.ResvRegister, false, 0, 0, 0xa))
	if err := s.SetNamespaceHosts(1, []string{fenceHostNQN(2)}); err != nil {
		t.Fatal(err)
	}
	must(t, "b preempts a again", b.resvAcquire(nvme.ResvPreempt, nvme.ResvWriteExclusive, 0xb, 0xa))
	if n := a.readResvLog(); n.Type != 0 {
		t.Fatalf("a's notice queued while the namespace was hidden from it: %+v", n)
	}
}

// A host connected only through this daemon hears of the other daemon's
// preempt when this daemon reads it from the shared record.
func TestResvNoticeFromOtherDaemon(t *testing.T) {
	m := &sharedMedium{state: ReservationState{Generation: 3, Type: nvme.ResvWriteExclusive, Holder: fenceA,
		Registrants: []Registrant{{fenceA, 0xa}, {fenceB, 0xb}}}}
	tg, p := restartWith(t, &sharedView{m: m})
	a := resvHost(t, tg, p, 1)
	m.mu.Lock()
	m.state, m.version = bHoldsWE, m.version+1
	m.mu.Unlock()
	if err := tg.Subsystem(testNQN).Namespace(1).ReloadReservation(); err != nil {
		t.Fatal(err)
	}
	if n := a.readResvLog(); n.Type != nvme.ResvNoticeRegPreempted || n.NSID != 1 {
		t.Fatalf("a's notice after the other daemon preempted it: %+v, want Registration Preempted on namespace 1", n)
	}
}
