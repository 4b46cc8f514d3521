package fabrics

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Per-namespace QoS: rate limits shared by every queue and controller of a
// namespace, so that one busy volume cannot take the pollers and the data
// buffers of all the others.
//
// A command over the limit waits in fabrics, between Prepare and the
// transport's data mapping: it holds no data buffer while it waits. The
// waiters of a namespace are kept per host (host NQN), in arrival order;
// hosts take turns, one command each, so a host's share does not grow with
// its queue count or depth. One timer per limited namespace, armed only
// while commands wait, hands the commands that fit back to their queues'
// pollers (the completion handoff and Wake): an idle poller still sleeps,
// and no poller runs a timer of its own. A poller of an unlimited
// namespace reads one atomic pointer per command; a limited namespace's
// commands take its gate's mutex once each (the one cost shared across
// queues), and the timer takes it once per batch it releases.

// QoSLimits are a namespace's rate limits; 0 is no limit. A read is a
// command that moves data to the host, a write one that moves data from
// it; commands without data (Flush, Write Zeroes, Dataset Management)
// count against IOPS only.
type QoSLimits struct {
	IOPS, ReadIOPS, WriteIOPS                uint64 // commands per second
	Bandwidth, ReadBandwidth, WriteBandwidth uint64 // bytes per second
}

// Limited reports whether any limit is set.
func (l QoSLimits) Limited() bool { return l != QoSLimits{} }

// qosBurst is how much of its rate a bucket holds: after an idle spell a
// namespace runs 100 ms worth of commands at once, then at the rate. Over
// 10 s this adds 1 % at most.
const qosBurst = 100 * time.Millisecond

// qosCatchUp is how much of its rate a bucket holds while commands wait:
// a timer that fires late (a CPU stall) releases what accrued meanwhile
// instead of losing all but the burst, so the rate holds. Once nothing
// waits, the bucket is cut back to its burst.
const qosCatchUp = time.Second

// qosMinTick is the shortest wait the gate's timer is armed for: at high
// limits one timer run releases a batch instead of one command each.
const qosMinTick = 500 * time.Microsecond

// The buckets of a gate, one per limit.
const (
	bucketIOPS = iota
	bucketReadIOPS
	bucketWriteIOPS
	bucketBandwidth
	bucketReadBandwidth
	bucketWriteBandwidth
	numBuckets
)

// tokenBucket is one limit: level units available, refilled at rate per
// second up to burst. A command larger than the burst passes once the
// bucket is full and leaves it in debt, so that the long-run rate holds
// for any command size.
type tokenBucket struct {
	rate  float64 // units per second; 0: no limit
	burst float64
	level float64
}

// need is the level a command of cost units waits for.
func (b *tokenBucket) need(cost float64) float64 { return min(cost, b.burst) }

// qosBuckets is the pure state of a namespace's limits: it has no clock
// of its own and no goroutine; the gate passes the time in.
type qosBuckets struct {
	b    [numBuckets]tokenBucket
	last time.Duration // when the levels were last brought up to date
}

// set applies new limits, keeping what the buckets hold (up to the new
// bursts): a change takes effect for the next command.
func (q *qosBuckets) set(l QoSLimits, now time.Duration) {
	q.refill(now, false)
	rates := [numBuckets]uint64{l.IOPS, l.ReadIOPS, l.WriteIOPS, l.Bandwidth, l.ReadBandwidth, l.WriteBandwidth}
	for i, r := range rates {
		b := &q.b[i]
		wasLimited := b.rate != 0
		b.rate = float64(r)
		b.burst = max(b.rate*qosBurst.Seconds(), 1)
		if !wasLimited {
			b.level = b.burst // a new limit starts full
		}
		b.level = min(b.level, b.burst)
	}
}

// refill brings the levels up to now. While commands wait (backlogged),
// a bucket may hold up to qosCatchUp of its rate, else its burst.
func (q *qosBuckets) refill(now time.Duration, backlogged bool) {
	dt := max(0, (now - q.last).Seconds())
	q.last = max(q.last, now)
	for i := range q.b {
		b := &q.b[i]
		if b.rate == 0 {
			continue
		}
		limit := b.burst
		if backlogged {
			limit = max(b.burst, b.rate*qosCatchUp.Seconds())
		}
		b.level = min(limit, b.level+b.rate*dt)
	}
}

// qosCost is what one command takes from each bucket.
type qosCost [numBuckets]float64

// costOf is the cost of a command moving n bytes in direction dir.
func costOf(dir DataDir, n uint32) qosCost {
	var c qosCost
	c[bucketIOPS] = 1
	switch dir {
	case DirCtrlToHost:
		c[bucketReadIOPS], c[bucketBandwidth], c[bucketReadBandwidth] = 1, float64(n), float64(n)
	case DirHostToCtrl:
		c[bucketWriteIOPS], c[bucketBandwidth], c[bucketWriteBandwidth] = 1, float64(n), float64(n)
	}
	return c
}

// fits reports whether a command of cost c may pass now.
func (q *qosBuckets) fits(c *qosCost) bool {
	for i := range q.b {
		b := &q.b[i]
		// A nanosecond's refill of slack absorbs the rounding of wait.
		if b.rate != 0 && c[i] != 0 && b.level+b.rate*1e-9+1e-9 < b.need(c[i]) {
			return false
		}
	}
	return true
}

// take charges a command of cost c, fitting or not (a fused pair is
// charged but never held back).
func (q *qosBuckets) take(c *qosCost) {
	for i := range q.b {
		if b := &q.b[i]; b.rate != 0 {
			b.level -= c[i]
		}
	}
}

// wait is how long from the last refill until a command of cost c fits.
func (q *qosBuckets) wait(c *qosCost) time.Duration {
	var s float64
	for i := range q.b {
		b := &q.b[i]
		if b.rate != 0 && c[i] != 0 {
			s = max(s, (b.need(c[i])-b.level)/b.rate)
		}
	}
	return time.Duration(math.Round(s * 1e9))
}

// qosWait is a request's place among its namespace's waiters.
type qosWait struct {
	next    *Request      // the host's next waiter
	since   time.Duration // on the gate's clock, for the wait time metric
	granted bool          // in the queue's handoff to resume, not to complete
}

// qosHost is one host's waiters, oldest first.
type qosHost struct {
	nqn        string
	head, tail *Request
}

func (h *qosHost) push(r *Request) {
	r.qos.next = nil
	if h.tail == nil {
		h.head = r
	} else {
		h.tail.qos.next = r
	}
	h.tail = r
}

func (h *qosHost) pop() *Request {
	r := h.head
	h.head = r.qos.next
	if h.head == nil {
		h.tail = nil
	}
	r.qos.next = nil
	return r
}

// namespaceQoS is a namespace's QoS: its gate while it has limits, and
// counters that outlive a change of limits.
type namespaceQoS struct {
	gate      atomic.Pointer[qosGate]
	mu        sync.Mutex // serialises SetQoS
	throttled atomic.Uint64
	waitNanos atomic.Uint64
}

// qosGate enforces one set of limits. Requests wait on it between Prepare
// and their data mapping, holding their queue (hold) and their namespace
// claim, but no data buffer.
type qosGate struct {
	mu      sync.Mutex
	stats   *namespaceQoS
	clock   Clock
	now     func() time.Duration
	limits  QoSLimits
	buckets qosBuckets
	hosts   map[string]*qosHost // every host that ever waited: a few per namespace
	turn    []*qosHost          // hosts with waiters, in turn order
	next    int                 // index in turn of the host whose command goes next
	waiting int
	open    bool // limits gone or the namespace removed: nothing waits any more

	timer Timer
	reset func(time.Duration) bool // timer's Reset, when its clock has one
	armed bool
	fire  func() // g.release, bound once: arming allocates nothing
}

// nower is a clock that can tell the time: the wall clock and ManualClock.
type nower interface{ Now() time.Duration }

// Now is the wall clock's reading for QoS, on the monotonic clock.
func (wallClock) Now() time.Duration { return time.Duration(nanotime()) }

// Now is the manual clock's time since it was made.
func (c *ManualClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Reset arms the timer again to fire d from now, as time.Timer's Reset.
func (t *manualTimer) Reset(d time.Duration) bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	was := !t.stopped && !t.fired
	t.at, t.stopped, t.fired = c.now+d, false, false
	if !slices.Contains(c.timers, t) {
		c.timers = append(c.timers, t)
	}
	c.armed++
	return was
}

func newQoSGate(stats *namespaceQoS, c Clock, l QoSLimits) *qosGate {
	g := &qosGate{stats: stats, clock: c, hosts: map[string]*qosHost{}}
	g.now = func() time.Duration { return time.Duration(nanotime()) }
	if n, ok := c.(nower); ok {
		g.now = n.Now
	}
	g.fire = g.release
	g.limits = l
	g.buckets.last = g.now()
	g.buckets.set(l, g.buckets.last)
	return g
}

// Resumer is implemented by transports whose commands can wait on a
// namespace's QoS limit. Resume maps the data of a command whose Prepare
// returned false without completing it, and executes it, as it would have
// after Prepare returned true. It runs on the queue's poller.
type Resumer interface {
	Resume(r *Request)
}

// throttle holds r back if its namespace is over its limit, reporting
// whether it did, or the status r completes with: a change of access
// (fence.go) came between its admission and the gate. Namespaces without
// limits cost one atomic load.
func (q *Queue) throttle(r *Request) (bool, nvme.Status) {
	g := r.ns.qos.gate.Load()
	if g == nil {
		return false, 0
	}
	return g.admit(q, r)
}

// admit charges r, or queues it behind the host's earlier waiters.
func (g *qosGate) admit(q *Queue, r *Request) (bool, nvme.Status) {
	c := costOf(r.Dir, r.Len)
	resumable := q.resumer != nil
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		return false, 0
	}
	now := g.now()
	g.buckets.refill(now, g.waiting > 0)
	if g.waiting == 0 && g.buckets.fits(&c) || !resumable || r.Cmd.Fuse() != 0 || r.pair != nil || isResvCommand(r.Cmd.Opcode()) {
		// A fused pair, or a transport that cannot resume, is charged
		// but never held: its commands depend on each other. Nor is a
		// reservation command: it must not wait behind the writes it
		// fences.
		g.buckets.take(&c)
		return false, 0
	}
	// Checked again under the gate's mutex: a fence that published a
	// narrower rule after r's check either finds r among the waiters
	// (endRefused) or r reads the rule here.
	if st := q.admission(r); st != 0 {
		return false, st
	}
	h := g.hosts[q.ctrl.HostNQN]
	if h == nil {
		h = &qosHost{nqn: q.ctrl.HostNQN}
		g.hosts[h.nqn] = h
	}
	if h.head == nil {
		g.turn = append(g.turn, h)
	}
	r.qos.since = now
	h.push(r)
	g.waiting++
	q.hold()
	g.stats.throttled.Add(1)
	g.armLocked()
	return true, 0
}

// release is the timer's: it lets the waiters that fit go, hosts taking
// turns, and arms the timer for the next one.
func (g *qosGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = false
	now := g.now()
	g.buckets.refill(now, g.waiting > 0)
	for g.waiting > 0 {
		h := g.turn[g.next]
		r := h.head
		c := costOf(r.Dir, r.Len)
		if !g.open && !g.buckets.fits(&c) {
			break
		}
		g.buckets.take(&c)
		g.grantLocked(h, now)
	}
	g.armLocked()
}

// grantLocked hands the next waiter of h, the host whose turn it is, back
// to its poller, and moves the turn on.
func (g *qosGate) grantLocked(h *qosHost, now time.Duration) {
	r := h.pop()
	g.waiting--
	if h.head == nil {
		g.turn = slices.Delete(g.turn, g.next, g.next+1)
	} else {
		g.next++
	}
	if g.next >= len(g.turn) {
		g.next = 0
	}
	g.stats.waitNanos.Add(uint64(max(0, now-r.qos.since)))
	r.qos.granted = true
	q := r.q
	q.done <- r // room for every request: never blocks
	q.tr.Wake()
	q.unhold()
}

// armLocked arms the timer for when the next waiter fits.
func (g *qosGate) armLocked() {
	if g.armed || g.waiting == 0 {
		return
	}
	h := g.turn[g.next]
	c := costOf(h.head.Dir, h.head.Len)
	d := max(g.buckets.wait(&c)-(g.now()-g.buckets.last), qosMinTick)
	g.armed = true
	if g.timer != nil && g.reset != nil {
		g.reset(d)
		return
	}
	g.timer = g.clock.AfterFunc(d, g.fire)
	if rs, ok := g.timer.(interface{ Reset(time.Duration) bool }); ok {
		g.reset = rs.Reset
	}
}

// setLimits changes the limits in place: waiters stay in their order and
// the timer is armed for the new rate.
func (g *qosGate) setLimits(l QoSLimits) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limits = l
	g.buckets.set(l, g.now())
	g.rearmLocked()
}

// openUp lets every waiter go at once and every later command pass: the
// limits were removed, or the namespace is.
func (g *qosGate) openUp() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = true
	now := g.now()
	for g.waiting > 0 {
		g.grantLocked(g.turn[g.next], now)
	}
	g.rearmLocked()
}

// rearmLocked stops the timer and arms it again for what waits now.
func (g *qosGate) rearmLocked() {
	if g.armed && g.timer != nil {
		g.timer.Stop()
	}
	g.armed = false
	g.armLocked()
}

// cancel takes q's waiters off the gate as q closes: they never run, and
// their transport takes them back. It reports how many.
func (g *qosGate) cancel(q *Queue) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.removeLocked(func(r *Request) bool { return r.q == q }, func(r *Request) {
		r.release()
		q.unhold()
	})
	g.rearmLocked()
	return n
}

// endRefused ends the waiters that the rules now in force refuse
// (Queue.admission): each goes back to its poller, which completes it
// with the rule's status. A fence calls it after publishing a narrower
// rule, so that a waiter admitted under the old one never runs.
func (g *qosGate) endRefused() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removeLocked(func(r *Request) bool {
		st := r.q.admission(r)
		r.status = st
		return st != 0
	}, func(r *Request) {
		q := r.q
		q.done <- r // room for every request: never blocks
		q.tr.Wake()
		q.unhold()
	}) > 0 {
		g.rearmLocked()
	}
}

// removeLocked takes every waiter that match selects off the gate,
// keeping the others' order and turns, and hands each to gone. It
// reports how many went. Called with g.mu held.
func (g *qosGate) removeLocked(match func(*Request) bool, gone func(*Request)) int {
	n := 0
	for i := 0; i < len(g.turn); {
		h := g.turn[i]
		var prev, keep *Request
		for r := h.head; r != nil; {
			next := r.qos.next
			if !match(r) {
				prev, keep = r, r
				r = next
				continue
			}
			if prev == nil {
				h.head = next
			} else {
				prev.qos.next = next
			}
			r.qos.next = nil
			g.waiting--
			n++
			gone(r)
			r = next
		}
		h.tail = keep
		if h.head != nil {
			i++
			continue
		}
		g.turn = slices.Delete(g.turn, i, i+1)
		if g.next > i {
			g.next--
		}
	}
	if g.next >= len(g.turn) {
		g.next = 0
	}
	return n
}

// cancelThrottled takes the closing queue's waiters off the gates of the
// namespaces it used.
func (q *Queue) cancelThrottled(stats []nsStat) {
	for _, e := range stats {
		if g := e.ns.qos.gate.Load(); g != nil {
			g.cancel(q)
		}
	}
}

// resume gives a request the gate let go back to its transport, unless
// a change of access since it was admitted refuses it now (fence.go).
func (q *Queue) resume(r *Request) {
	r.qos.granted = false
	if st := q.admission(r); st != 0 {
		r.status = st
		q.complete(r)
		return
	}
	q.resumer.Resume(r)
}

// SetQoS sets the namespace's limits, live: commands waiting stay in
// order and go at the new rate; no limit lets them all go.
func (s *Subsystem) SetQoS(nsid uint32, l QoSLimits) error {
	ns := s.Namespace(nsid)
	if ns == nil {
		return fmt.Errorf("namespace %d does not exist", nsid)
	}
	c := Clock(wallClock{})
	if s.target != nil {
		c = s.target.clock
	}
	ns.setQoS(l, c)
	return nil
}

// SetQoS sets the limits of a namespace not yet added to a subsystem,
// on the wall clock.
func (ns *Namespace) SetQoS(l QoSLimits) { ns.setQoS(l, wallClock{}) }

func (ns *Namespace) setQoS(l QoSLimits, c Clock) {
	ns.qos.mu.Lock()
	defer ns.qos.mu.Unlock()
	g := ns.qos.gate.Load()
	switch {
	case !l.Limited() && g != nil:
		ns.qos.gate.Store(nil)
		g.openUp()
	case !l.Limited():
	case g == nil:
		ns.qos.gate.Store(newQoSGate(&ns.qos, c, l))
	default:
		g.setLimits(l)
	}
}

// openQoS lets the namespace's waiters go as it is removed: the removal
// waits for the commands it claimed, which must not wait on the limit.
func (ns *Namespace) openQoS() {
	ns.qos.mu.Lock()
	defer ns.qos.mu.Unlock()
	if g := ns.qos.gate.Load(); g != nil {
		g.openUp()
	}
}

// QoS is the namespace's limits (all zero: none).
func (ns *Namespace) QoS() QoSLimits {
	g := ns.qos.gate.Load()
	if g == nil {
		return QoSLimits{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limits
}

// QoSStats are a namespace's QoS counters.
type QoSStats struct {
	Throttled uint64        // commands that waited on a limit
	Waited    time.Duration // their total wait
	Waiting   int           // commands waiting now
}

// QoSStats reads the namespace's QoS counters.
func (ns *Namespace) QoSStats() QoSStats {
	s := QoSStats{Throttled: ns.qos.throttled.Load(), Waited: time.Duration(ns.qos.waitNanos.Load())}
	if g := ns.qos.gate.Load(); g != nil {
		g.mu.Lock()
		s.Waiting = g.waiting
		g.mu.Unlock()
	}
	return s
}
