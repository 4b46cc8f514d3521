package fabrics

import (
	"slices"
	"sync"
	"time"
)

// Clock is where the target's timers (keep alive) come from. The daemon
// runs on the wall clock; tests drive a ManualClock step by step, as
// etcd-io/raft's Tick drives its elections, so timer behaviour is tested
// without waiting.
type Clock interface {
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer the controllers use.
type Timer interface{ Stop() bool }

type wallClock struct{}

func (wallClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// SetClock replaces the target's clock. Call it before any host connects.
func (t *Target) SetClock(c Clock) { t.clock = c }

// ManualClock is a Clock that moves only when told to: Advance fires the
// timers that fall due, in order, on the caller's goroutine.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Duration // since the clock was made
	timers []*manualTimer
	armed  int // timers ever started, for tests that count them
}

type manualTimer struct {
	c       *ManualClock
	at      time.Duration
	f       func()
	stopped bool
	fired   bool
}

// AfterFunc implements Clock.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now + d, f: f}
	c.timers = append(c.timers, t)
	c.armed++
	return t
}

// Stop implements Timer: it reports whether it stopped the timer before it
// fired.
func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped && !t.fired
	t.stopped = true
	return was
}

// Advance moves the clock d forward and runs every timer due by then,
// earliest first, including timers those runs start.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now + d
	c.mu.Unlock()
	for {
		t := c.nextDue(end)
		if t == nil {
			break
		}
		t.f()
	}
	c.mu.Lock()
	c.now = end
	c.mu.Unlock()
}

// nextDue takes the earliest live timer due by end off the list, marked
// fired, and moves the clock to it.
func (c *ManualClock) nextDue(end time.Duration) *manualTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = slices.DeleteFunc(c.timers, func(t *manualTimer) bool { return t.stopped || t.fired })
	i := -1
	for j, t := range c.timers {
		if t.at <= end && (i < 0 || t.at < c.timers[i].at) {
			i = j
		}
	}
	if i < 0 {
		return nil
	}
	t := c.timers[i]
	t.fired = true
	c.now = max(c.now, t.at)
	return t
}

// Pending is how many timers are armed and not yet due.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped && !t.fired {
			n++
		}
	}
	return n
}

// Armed is how many timers were ever started.
func (c *ManualClock) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armed
}
