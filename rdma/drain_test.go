package rdma

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeDrain stands in for a queue pair and its device in drainQueue. Its
// completion queue holds what the device completed; each blocking poll
// runs the device's next step, or lets the wait run out on the fake clock.
type fakeDrain struct {
	t       *testing.T
	cq      []string // completions not yet polled: "recv" or "send"
	onWire  int      // sends posted and not completed
	lastWQE bool     // LAST_WQE_REACHED seen (or no shared receive queue)
	device  []func(*fakeDrain)
	now     time.Time
	pollErr bool

	steps     []string // what drainQueue did, in order
	handled   []string // completions handled
	destroyed bool
}

func (f *fakeDrain) pollCQ(wait time.Duration) int {
	if f.pollErr {
		return -1
	}
	if len(f.cq) == 0 && wait > 0 {
		if len(f.device) > 0 {
			step := f.device[0]
			f.device = f.device[1:]
			step(f)
		} else {
			f.now = f.now.Add(wait)
		}
	}
	n := min(len(f.cq), pollBatch)
	for _, wc := range f.cq[:n] {
		if f.destroyed {
			f.steps = append(f.steps, "poll after destroy")
		} else {
			f.steps = append(f.steps, "poll")
		}
		f.handled = append(f.handled, wc)
		if wc == "send" {
			f.onWire--
		}
	}
	f.cq = f.cq[n:]
	return n
}

func (f *fakeDrain) settled() bool { return f.onWire == 0 && f.lastWQE }

func (f *fakeDrain) destroyQP() {
	f.destroyed = true
	f.steps = append(f.steps, "destroy")
}

func (f *fakeDrain) releaseAll() {
	if len(f.cq) > 0 {
		f.t.Errorf("buffers released with %d completions still in the CQ: %v", len(f.cq), f.cq)
	}
	f.steps = append(f.steps, "release")
}

func (f *fakeDrain) run() bool {
	return drainQueue(f, f.now.Add(drainTimeout), func() time.Time { return f.now })
}

// checkOrder fails unless the queue pair was destroyed once, then its
// buffers released once, last.
func (f *fakeDrain) checkOrder() {
	f.t.Helper()
	d, r := slices.Index(f.steps, "destroy"), slices.Index(f.steps, "release")
	if d < 0 || r != len(f.steps)-1 || d > r || strings.Count(strings.Join(f.steps, ","), "destroy") != 1 {
		f.t.Errorf("steps %v: want the queue pair destroyed, then the buffers released, last", f.steps)
	}
}

// Receive completions still in the completion queue when no request is on
// the wire are polled before the buffers go back: each is a shared receive
// queue entry, reposted only when its completion is seen.
func TestDrainPollsReceivesLeftInTheCQ(t *testing.T) {
	f := &fakeDrain{t: t, cq: []string{"recv", "recv", "recv"}, lastWQE: true}
	if !f.run() {
		t.Error("a queue pair that settled reported a timeout")
	}
	if len(f.handled) != 3 {
		t.Errorf("handled %v, want the 3 receives", f.handled)
	}
	if i := slices.Index(f.steps, "destroy"); i != 3 {
		t.Errorf("steps %v: want the 3 receives polled before the queue pair is destroyed", f.steps)
	}
	f.checkOrder()
}

// On a shared receive queue the queue pair is destroyed only after the
// device reported its last receive (LAST_WQE_REACHED), and the flushed
// receive that comes with it is polled too.
func TestDrainWaitsForLastWQE(t *testing.T) {
	f := &fakeDrain{t: t, cq: []string{"send"}, onWire: 1, device: []func(*fakeDrain){
		func(f *fakeDrain) {}, // a wake with nothing in it
		func(f *fakeDrain) { f.cq = append(f.cq, "recv"); f.lastWQE = true },
	}}
	start := f.now
	if !f.run() {
		t.Error("a queue pair that settled reported a timeout")
	}
	if f.now != start {
		t.Errorf("drain waited %v on the clock; the device answered every wait", f.now.Sub(start))
	}
	if !slices.Equal(f.handled, []string{"send", "recv"}) {
		t.Errorf("handled %v, want the send and the flushed receive", f.handled)
	}
	if !slices.Equal(f.steps, []string{"poll", "poll", "destroy", "release"}) {
		t.Errorf("steps %v", f.steps)
	}
}

// A device that never flushes: at the deadline the queue pair is
// destroyed all the same, and only then do its buffers go back, with what
// the device completed before the destroy polled first.
func TestDrainTimeoutDestroysBeforeRelease(t *testing.T) {
	f := &fakeDrain{t: t, onWire: 2, lastWQE: true, device: []func(*fakeDrain){
		func(f *fakeDrain) { f.cq = append(f.cq, "send") },
	}}
	start := f.now
	if f.run() {
		t.Error("a queue pair with a send never completed reported it settled")
	}
	if got := f.now.Sub(start); got != drainTimeout {
		t.Errorf("gave up after %v, want %v", got, drainTimeout)
	}
	f.checkOrder()
}

// A failed poll ends the wait, not the order.
func TestDrainPollErrorDestroysBeforeRelease(t *testing.T) {
	f := &fakeDrain{t: t, onWire: 1, lastWQE: true, pollErr: true}
	if f.run() {
		t.Error("a failed poll reported the queue pair settled")
	}
	f.checkOrder()
}

// Completions the device made between the last poll and the destroy are
// polled after it, before the release.
func TestDrainSweepsAfterDestroy(t *testing.T) {
	f := &fakeDrain{t: t, lastWQE: true}
	d := &sweepDrain{fakeDrain: f}
	drainQueue(d, f.now.Add(drainTimeout), func() time.Time { return f.now })
	if !slices.Equal(f.steps, []string{"destroy", "poll after destroy", "release"}) {
		t.Errorf("steps %v: want the receive that landed at the destroy polled before the release", f.steps)
	}
}

// sweepDrain lands one receive completion as the queue pair is destroyed.
type sweepDrain struct{ *fakeDrain }

func (s *sweepDrain) destroyQP() {
	s.fakeDrain.destroyQP()
	s.cq = append(s.cq, "recv")
}

// The limit is armed again only once the ring has recovered well above
// it, so a ring hovering at the watermark raises one event, not one per
// command.
func TestSRQRearm(t *testing.T) {
	for _, c := range []struct {
		armed  bool
		posted int64
		limit  int
		want   bool
	}{
		{false, 512, 512, false},
		{false, 1023, 512, false},
		{false, 1024, 512, true},
		{true, 4096, 512, false},
	} {
		if got := shouldRearm(c.armed, c.posted, c.limit); got != c.want {
			t.Errorf("armed=%v posted=%d limit=%d: rearm %v, want %v", c.armed, c.posted, c.limit, got, c.want)
		}
	}
	if got := srqLimit(4096); got != 512 {
		t.Errorf("limit of a 4096-entry queue %d, want 512", got)
	}
	if got := srqLimit(4); got != 1 {
		t.Errorf("limit of a 4-entry queue %d, want 1", got)
	}
}

// Pollers fold their counts into the ring: posts add, completions take
// away, and the sum is exact once each has folded.
func TestSRQFold(t *testing.T) {
	r := &recvRing{}
	r.armed.Store(true) // no re-arm: no device here
	r.posted.Store(4096)
	var a, b int64 = -70, -3 // receives completed
	a += 70                  // reposted after their commands ran
	b += 1
	r.fold(a)
	r.fold(b)
	if got := r.posted.Load(); got != 4094 {
		t.Errorf("posted %d after 73 receives and 71 reposts, want 4094", got)
	}
	r.fold(2)
	if got := r.posted.Load(); got != 4096 {
		t.Errorf("posted %d once all came back, want 4096", got)
	}
}
