package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// stuckStore grants the first acquire and holds every renewal until
// unblock closes: the cluster stopped answering. Later acquires find the
// lock busy (a peer took it) and are reported on retried, if set.
type stuckStore struct {
	renewing chan struct{} // a renewal started
	unblock  chan struct{}
	retried  chan struct{}
	acquired bool
}

func (s *stuckStore) Lock(renew bool) error {
	switch {
	case renew:
		s.renewing <- struct{}{}
		<-s.unblock
	case s.acquired:
		select {
		case s.retried <- struct{}{}:
		default:
		}
		return ErrBusy
	}
	s.acquired = true
	return nil
}
func (s *stuckStore) Unlock() error             { return nil }
func (s *stuckStore) Recorded() (Holder, error) { return Holder{}, nil }
func (s *stuckStore) Record(Holder) error       { return nil }
func (s *stuckStore) Self() (string, error)     { return "10.0.0.1:0/1", nil }
func (s *stuckStore) Fence(string) error        { return nil }

// The owner steps down at its deadline while its renewal is stuck in the
// cluster: the step down waits for no call.
func TestRunnerStepsDownWhileRenewalHangs(t *testing.T) {
	var now atomic.Int64
	pub := make(chan State, 10)
	s := &stuckStore{renewing: make(chan struct{}, 1), unblock: make(chan struct{}), retried: make(chan struct{}, 1)}
	r := quietRunner(s, pub, &now)
	stop := run(r)
	expectOwner(t, pub)
	now.Store(int64(timing.Renew))
	r.Poke()
	<-s.renewing
	now.Store(int64(timing.Deadline))
	r.Poke() // the deadline timer's wake, without waiting for it
	if st := <-pub; st != Standby {
		t.Fatalf("at the deadline with the renewal stuck: published %v", st)
	}
	if st := r.Status(); st.State != Standby || st.Takeovers != 1 {
		t.Fatalf("status %+v", st)
	}
	// The renewal returns; the loop takes its result, then tries to
	// acquire again.
	close(s.unblock)
	<-s.retried
	stop()
	if r.Status().State != Standby {
		t.Fatal("a renewal that returned after the deadline made it the owner again")
	}
}

// recordingStore grants every lock and reports the calls that give the
// lease away.
type recordingStore struct {
	stuckStore
	calls chan string
}

func (s *recordingStore) Unlock() error { s.calls <- "unlock"; return nil }
func (s *recordingStore) Record(h Holder) error {
	switch {
	case h == (Holder{}):
		s.calls <- "clear record"
	case h.Cookie == "":
		s.calls <- "record handover to " + h.Handover
	}
	return nil
}

func quietRunner(s Store, pub chan State, now *atomic.Int64) *Runner {
	log := logrus.New()
	log.SetOutput(io.Discard)
	return &Runner{Lease: &Lease{Group: 1, Timing: timing}, Store: s, Me: Holder{Name: "a", Cookie: "a-1"},
		Publish: func(_ uint32, st State) { pub <- st }, Log: logrus.NewEntry(log),
		Now: func() time.Duration { return time.Duration(now.Load()) }}
}

// run starts r; stop cancels it and waits for its loop to end.
func run(r *Runner) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	r.Start(ctx)
	return func() { cancel(); r.Wait() }
}

// expectOwner waits for the runner to publish standby, then owner.
func expectOwner(t *testing.T, pub <-chan State) {
	t.Helper()
	for _, want := range []State{Standby, Owner} {
		if st := <-pub; st != want {
			t.Fatalf("published %v, want %v", st, want)
		}
	}
}

// A release unlocks only after the group's commands in flight have
// completed (Quiesce returned), within the owner's deadline; a quiesce
// that fails leaves the lock and the record for the next owner to fence
// this daemon by.
func TestRunnerReleaseWaitsForQuiesce(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var now atomic.Int64
		pub := make(chan State, 10)
		s := &recordingStore{calls: make(chan string, 10)}
		r := quietRunner(s, pub, &now)
		quiescing := make(chan time.Duration)
		result := make(chan error)
		r.Quiesce = func(group uint32, timeout time.Duration) error {
			quiescing <- timeout
			return <-result
		}
		stop := run(r)
		expectOwner(t, pub)
		now.Store(int64(time.Second))
		if !r.Release() {
			t.Fatal("the owner did not release")
		}
		if st := <-pub; st != Standby {
			t.Fatalf("published %v on release", st)
		}
		select {
		case c := <-s.calls:
			t.Fatalf("%s before the group's commands were quiesced", c)
		case timeout := <-quiescing:
			if timeout != timing.Deadline-time.Second {
				t.Errorf("quiesce given %v, want the time left to the deadline, %v", timeout, timing.Deadline-time.Second)
			}
		}
		select {
		case c := <-s.calls:
			t.Fatalf("%s while the group's commands are in flight", c)
		default:
		}
		var err error
		if fail {
			err = errors.New("commands still in flight")
		}
		result <- err
		stop()
		close(s.calls)
		var calls []string
		for c := range s.calls {
			calls = append(calls, c)
		}
		want := "[clear record unlock]"
		if fail {
			want = "[]"
		}
		if fmt.Sprint(calls) != want {
			t.Errorf("quiesce failed %v: calls %v, want %v", fail, calls, want)
		}
	}
}

// An I/O that finds the client blocklisted steps the owner down at once:
// the loop publishes it without any lock call.
func TestRunnerFencedStepsDownAtOnce(t *testing.T) {
	var now atomic.Int64
	pub := make(chan State, 10)
	s := &stuckStore{renewing: make(chan struct{}, 1), unblock: make(chan struct{})}
	r := quietRunner(s, pub, &now)
	defer run(r)()
	expectOwner(t, pub)
	r.Fenced()
	select {
	case st := <-pub:
		if st != Blocklisted {
			t.Fatalf("published %v after the fenced I/O, want blocklisted", st)
		}
	case <-time.After(10 * time.Second): // the renewal is 2.5 s away
		t.Fatal("no step down 10 s after the fenced I/O")
	}
	if len(s.renewing) != 0 {
		t.Fatal("a lock call before the step down")
	}
}

// standingByStore is a recordingStore on which the preferred gateway
// "p" stands by; each look for it is reported on looked.
type standingByStore struct {
	recordingStore
	looked chan struct{}
}

func (s *standingByStore) Lock(bool) error                      { return nil }
func (s *standingByStore) Announce(Holder, time.Duration) error { return nil }
func (s *standingByStore) Announced(name string) (string, error) {
	s.looked <- struct{}{}
	if name != "p" {
		return "", nil
	}
	return "p-1", nil
}

// The runner's failback: the owner looks for the preferred gateway at a
// renewal, and once it has seen it standing by for the delay releases the
// group as a planned handover: inaccessible, quiesced, then the handover
// to the preferred gateway recorded and the lock released.
func TestRunnerFailsBackThroughQuiesce(t *testing.T) {
	var now atomic.Int64
	pub := make(chan State, 10)
	s := &standingByStore{recordingStore: recordingStore{calls: make(chan string, 10)}, looked: make(chan struct{}, 10)}
	r := quietRunner(s, pub, &now)
	r.Lease.Name, r.Lease.Preferred, r.Lease.Failback = "a", "p", time.Second
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.Lease.Wall = func() time.Time { return epoch.Add(time.Duration(now.Load())) }
	quiesced := make(chan struct{}, 1)
	r.Quiesce = func(uint32, time.Duration) error {
		if len(s.calls) != 0 {
			t.Error("the lease was given away before the quiesce")
		}
		quiesced <- struct{}{}
		return nil
	}
	defer run(r)()
	expectOwner(t, pub)
	if got := r.Status().Since; !got.Equal(epoch) {
		t.Errorf("owner since %v, want %v", got, epoch)
	}
	now.Store(int64(timing.Renew))
	r.Poke()
	select {
	case <-s.looked: // seen standing by from this renewal on
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's renewal did not look for the preferred gateway")
	}
	now.Store(int64(timing.Renew + time.Second))
	r.Poke()
	select {
	case st := <-pub:
		if st != Standby {
			t.Fatalf("published %v at the failback", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no failback 10 s after the delay")
	}
	<-quiesced
	<-r.released
	if c := []string{<-s.calls, <-s.calls}; fmt.Sprint(c) != "[record handover to p unlock]" {
		t.Fatalf("calls %v", c)
	}
	// Since moves with the published state: it dates the failback.
	if st := r.Status(); st.Failbacks != 1 || st.State != Standby || !st.Since.Equal(epoch.Add(timing.Renew+time.Second)) {
		t.Fatalf("status %+v", st)
	}
}

// An acquire makes the group's namespaces ready (Ready) before the group
// turns optimized; one that cannot gives the lease back, its record left
// naming this daemon for the next owner to fence, and the group stays
// inaccessible until a later try succeeds.
func TestRunnerReadyBeforeServing(t *testing.T) {
	var now atomic.Int64
	events := make(chan string, 20)
	s := &recordingStore{calls: events}
	fail := errors.New("reservation state unreadable")
	var failing atomic.Bool
	failing.Store(true)
	r := quietRunner(s, nil, &now)
	r.Publish = func(_ uint32, st State) { events <- "publish " + st.String() }
	r.Ready = func(group uint32) error {
		events <- fmt.Sprintf("ready %d", group)
		if failing.Load() {
			return fail
		}
		return nil
	}
	defer run(r)()
	for _, want := range []string{"publish standby", "ready 1", "unlock"} {
		if got := <-events; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	// The loop has taken the result once Status shows its error.
	for st := r.Status(); st.LastError == ""; st = r.Status() {
		select {
		case e := <-events:
			t.Fatalf("after a failed ready: %q", e)
		case <-time.After(time.Millisecond): // polling the loop's state
		}
	}
	if st := r.Status(); st.State != Standby || st.Takeovers != 0 || !strings.Contains(st.LastError, fail.Error()) {
		t.Fatalf("after a failed ready: %+v", st)
	}
	// Past the hold-off, the next try serves.
	failing.Store(false)
	s.acquired = false
	now.Store(int64(timing.Holdoff + timing.Renew))
	r.Poke()
	for _, want := range []string{"ready 1", "publish owner"} {
		if got := <-events; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// blocklistedUnlock refuses the lease's giving back: the client was
// fenced.
type blocklistedUnlock struct{ stuckStore }

func (s *blocklistedUnlock) Unlock() error { return fmt.Errorf("unlock: %w", ErrBlocklisted) }

// A ready that fails because the client was fenced meanwhile leaves the
// group blocklisted, for its client to be rebuilt, not standing by on a
// client the cluster refuses.
func TestRunnerReadyFailsBlocklisted(t *testing.T) {
	var now atomic.Int64
	pub := make(chan State, 10)
	r := quietRunner(&blocklistedUnlock{}, pub, &now)
	r.Ready = func(uint32) error { return errors.New("image metadata: cannot send after transport endpoint shutdown") }
	defer run(r)()
	if st := <-pub; st != Standby {
		t.Fatalf("published %v first", st)
	}
	// The loop has taken the result once Status shows its error.
	for r.Status().LastError == "" {
		time.Sleep(time.Millisecond) // polling the loop's state
	}
	if st := r.Status(); st.State != Blocklisted {
		t.Fatalf("after a ready that found the client fenced: %+v", st)
	}
	if st := <-pub; st != Blocklisted {
		t.Fatalf("published %v, want blocklisted", st)
	}
}

// announcingStore finds the lease held, and reports each announcement.
type announcingStore struct {
	stuckStore
	announced chan string
}

func (s *announcingStore) Announce(me Holder, _ time.Duration) error {
	s.announced <- me.Name
	return nil
}
func (s *announcingStore) Announced(string) (string, error) { return "", nil }

// The preferred gateway standing by announces itself for a failback only
// while it can make the group's namespaces ready (Ready): one that could
// not serve the group is not handed it.
func TestRunnerAnnouncesOnlyWhenReady(t *testing.T) {
	var now atomic.Int64
	s := &announcingStore{stuckStore: stuckStore{acquired: true}, announced: make(chan string, 10)}
	r := quietRunner(s, make(chan State, 10), &now)
	r.Lease.Name, r.Lease.Preferred = "a", "a"
	tries := make(chan error, 10)
	var ready atomic.Bool
	r.Ready = func(uint32) error {
		var err error
		if !ready.Load() {
			err = errors.New("image metadata: timed out")
		}
		tries <- err
		return err
	}
	defer run(r)()
	if err := <-tries; err == nil {
		t.Fatal("the probe passed")
	}
	ready.Store(true)
	now.Store(int64(timing.Renew))
	r.Poke()
	if err := <-tries; err != nil {
		t.Fatal(err)
	}
	// Both tries' results taken: every announcement they made is sent.
	for r.Status().Ops < 2 {
		time.Sleep(time.Millisecond) // polling the loop's state
	}
	if n := len(s.announced); n != 1 || <-s.announced != "a" {
		t.Fatalf("%d announcements after a failed and a passed probe, want 1, of a", n)
	}
}
