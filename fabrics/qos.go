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
// transport's data mapping: it holds no data buffer while it waits.
// Waiters wait in lanes (reads, writes, commands without data), so that
// a limit holds only the commands it applies to, and a command no limit
// applies to never waits; within a lane each host's (host NQN) wait in
// arrival order. Hosts take turns weighted by what each command takes of
// the limits (bytes under a bandwidth limit), so a host's share does not
// grow with its queue count, depth or command size, and a limit shared by
// the lanes takes their commands in turn. One timer per limited namespace,
// armed only while commands wait, hands the commands that fit back to
// their queues' pollers (the completion handoff and Wake): an idle poller
// still sleeps, and no poller runs a timer of its own. A command waits
// qosMaxWait at most, and an Abort naming it ends it: either way it goes
// back to its poller the same way, to complete. A poller of an
// unlimited namespace reads one atomic pointer per command; a limited
// namespace's commands take its gate's mutex once each (the one cost
// shared across queues), and the timer takes it once per batch it
// releases.

// QoSLimits are a namespace's rate limits; 0 is no limit. A read is a
// command that moves data to the host, a write one that moves data from
// it; commands without data (Flush, Write Zeroes) count against IOPS
// only. Dataset Management (deallocate) is a write of no bytes: its range
// descriptors name blocks, they are not data.
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

// qosMaxWait bounds a command's wait on a limit. Beyond it, the command
// completes with Command Interrupted, which the host retries, instead of
// waiting on until the host's I/O timeout (Linux: 30 s) resets the
// controller: a host whose queues hold more than the limit serves in that
// time (3 queues of 128 at 10 IOPS: 38 s) would otherwise reach it. Tests
// shorten it; it must be above 0.
var qosMaxWait = 10 * time.Second

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

// requestCost is r's cost: a Dataset Management command is one write and
// no bytes (QoSLimits).
func requestCost(r *Request) qosCost {
	if r.Cmd.Opcode() == nvme.IODatasetMgmt {
		return costOf(r.Dir, 0)
	}
	return costOf(r.Dir, r.Len)
}

// add adds o to c: a fused pair costs both its commands.
func (c *qosCost) add(o qosCost) {
	for i := range c {
		c[i] += o[i]
	}
}

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
func (q *qosBuckets) fits(c *qosCost) bool { return q.short(c) == 0 }

// short is the set (a bit per bucket) of the limits a command of cost c
// does not fit now.
func (q *qosBuckets) short(c *qosCost) uint8 {
	var m uint8
	for i := range q.b {
		b := &q.b[i]
		// A nanosecond's refill of slack absorbs the rounding of wait.
		if b.rate != 0 && c[i] != 0 && b.level+b.rate*1e-9+1e-9 < b.need(c[i]) {
			m |= 1 << i
		}
	}
	return m
}

// limited is the set of the limits a command of cost c draws from: none,
// and it never waits.
func (q *qosBuckets) limited(c *qosCost) uint8 {
	var m uint8
	for i := range q.b {
		if q.b[i].rate != 0 && c[i] != 0 {
			m |= 1 << i
		}
	}
	return m
}

// take charges a command of cost c, fitting or not (one that is charged
// but never held: a reservation command, or its transport cannot resume).
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
	next    *Request      // the next waiter of its host and lane
	since   time.Duration // on the gate's clock, for the wait time metric
	seq     uint64        // arrival order: of two waiters that start together, the older goes
	granted bool          // in the queue's handoff to resume, not to complete
}

// The lanes of a gate: the kinds of command whose limits differ, so that
// they wait apart. A write waiting on a write limit holds no read.
const (
	laneRead  = iota // data to the host
	laneWrite        // data from the host
	laneNone         // no data: only IOPS applies
	numLanes
)

func laneOf(dir DataDir) int {
	switch dir {
	case DirCtrlToHost:
		return laneRead
	case DirHostToCtrl:
		return laneWrite
	}
	return laneNone
}

// qosFIFO is one host's waiters of one lane, oldest first.
type qosFIFO struct {
	host       *qosHost
	head, tail *Request
}

func (f *qosFIFO) push(r *Request) {
	r.qos.next = nil
	if f.tail == nil {
		f.head = r
	} else {
		f.tail.qos.next = r
	}
	f.tail = r
}

func (f *qosFIFO) pop() *Request {
	r := f.head
	f.head = r.qos.next
	if f.head == nil {
		f.tail = nil
	}
	r.qos.next = nil
	return r
}

// qosHost is one host's waiters, and its place in the turns.
//
// Hosts take turns by start-time fair queuing, kept per limit: a
// command's start on a limit is the later of the limit's virtual time
// (the start of the last command it let go) and the host's finish there
// (where the host's previous command on it ended); it finishes the time
// it takes of the limit later (its bytes over the rate, or one over the
// IOPS). Of the waiters at the head of their lanes, the one with the
// earliest start (the latest over the limits it draws from) goes first.
// A host's share does not grow with its queue count or depth, nor with
// the size of its commands, and its reads do not use up its turns on a
// limit of writes only.
type qosHost struct {
	nqn    string
	lanes  [numLanes]qosFIFO
	finish [numBuckets]float64
}

// namespaceQoS is a namespace's QoS: its gate while it has limits, and
// counters that outlive a change of limits.
type namespaceQoS struct {
	gate      atomic.Pointer[qosGate]
	mu        sync.Mutex // serialises SetQoS
	throttled atomic.Uint64
	waitNanos atomic.Uint64
	timedOut  atomic.Uint64
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
	active  []*qosFIFO          // the lanes of hosts that have waiters
	vtime   [numBuckets]float64 // per limit: the fair queuing's virtual time
	seq     uint64
	waiting int
	open    bool // limits gone or the namespace removed: nothing waits any more

	timer Timer
	reset func(time.Duration) bool // timer's Reset, when its clock has one
	armed bool
	at    time.Duration // when the armed timer fires
	fire  func()        // g.release, bound once: arming allocates nothing
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

// admit charges r, or queues it in its lane behind its host's earlier
// waiters there.
func (g *qosGate) admit(q *Queue, r *Request) (bool, nvme.Status) {
	if r.Cmd.Fuse() == nvme.FuseFirst {
		// A fused pair is charged, and waits, as its second command:
		// the first only waits for its second, which it cannot do
		// behind it.
		return false, 0
	}
	c := requestCost(r)
	if r.pair != nil {
		c.add(requestCost(r.pair))
	}
	resumable := q.resumer != nil
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		return false, 0
	}
	now := g.now()
	g.buckets.refill(now, g.waiting > 0)
	if g.buckets.limited(&c) == 0 || g.waiting == 0 && g.buckets.fits(&c) ||
		!resumable || isResvCommand(r.Cmd.Opcode()) {
		// A command no limit applies to never waits. A command of a
		// transport that cannot resume is charged but never held.
		// Nor is a reservation command: it must not wait behind the
		// writes it fences.
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
		for i := range h.lanes {
			h.lanes[i].host = h
		}
		g.hosts[h.nqn] = h
	}
	f := &h.lanes[laneOf(r.Dir)]
	if f.head == nil {
		g.active = append(g.active, f)
	}
	r.qos.since, r.qos.seq = now, g.seq
	g.seq++
	f.push(r)
	g.waiting++
	// Others may wait on limits r does not draw from, or after r in
	// the turns: r goes now if it would be let go now.
	gone, next := g.passLocked(now, r)
	g.armLocked(now, next)
	if gone {
		return false, 0
	}
	q.hold()
	g.stats.throttled.Add(1)
	return true, 0
}

// release is the timer's: it lets the waiters that fit go and arms the
// timer for the next one.
func (g *qosGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = false
	g.settleLocked()
}

// settleLocked brings the buckets up to now, lets go the waiters that fit
// and arms the timer for what still waits.
func (g *qosGate) settleLocked() {
	now := g.now()
	g.buckets.refill(now, g.waiting > 0)
	_, next := g.passLocked(now, nil)
	g.armLocked(now, next)
}

// passLocked lets go the waiters that fit now, earliest start first, each
// back to its poller but self, the command being admitted: it reports
// whether self went (its caller lets it go on), and how long until the
// next waiter may fit or reaches the bound (-1: none waits).
//
// A waiter that does not fit reserves the limits it is short of for the
// rest of the pass: no later command draws from them before it, so small
// commands do not pass a large one forever. Waiters that draw only from
// other limits still go: one lane short of its limit holds no other.
func (g *qosGate) passLocked(now time.Duration, self *Request) (bool, time.Duration) {
	g.expireLocked(now)
	selfGone := false
	next := time.Duration(-1)
	var reserved uint8
	for {
		var best *qosFIFO
		var bestCost qosCost
		var bestStart float64
		for _, f := range g.active {
			c := requestCost(f.head)
			m := g.buckets.limited(&c)
			if m&reserved != 0 {
				continue
			}
			s := g.startOf(f.host, m)
			if best == nil || s < bestStart || s == bestStart && f.head.qos.seq < best.head.qos.seq {
				best, bestCost, bestStart = f, c, s
			}
		}
		if best == nil {
			// The oldest waiter of each lane reaches the bound first.
			for _, f := range g.active {
				if d := f.head.qos.since + qosMaxWait - now; next < 0 || d < next {
					next = d
				}
			}
			return selfGone, next
		}
		if short := g.buckets.short(&bestCost); short != 0 {
			reserved |= short
			if w := g.buckets.wait(&bestCost); next < 0 || w < next {
				next = w
			}
			continue
		}
		g.buckets.take(&bestCost)
		g.charge(best.host, &bestCost)
		r := g.popLocked(best)
		if r == self {
			selfGone = true
			continue
		}
		g.grantLocked(r, now)
	}
}

// expireLocked ends the waiters that waited qosMaxWait: each goes back to
// its poller, which completes it with Command Interrupted.
func (g *qosGate) expireLocked(now time.Duration) {
	for i := 0; i < len(g.active); {
		f := g.active[i]
		for f.head != nil && now-f.head.qos.since >= qosMaxWait {
			r := f.pop()
			g.waiting--
			g.stats.timedOut.Add(1)
			g.stats.waitNanos.Add(uint64(now - r.qos.since))
			r.status = nvme.StatusCommandInterrupted
			handBack(r)
		}
		if f.head != nil {
			i++
			continue
		}
		g.active = slices.Delete(g.active, i, i+1)
	}
}

// startOf is the start of host h's next command on the limits of set m.
func (g *qosGate) startOf(h *qosHost, m uint8) float64 {
	var s float64
	for i := range numBuckets {
		if m&(1<<i) != 0 {
			s = max(s, g.vtime[i], h.finish[i])
		}
	}
	return s
}

// charge moves h's finish and the virtual time on for a command of cost c
// let go: by the time the command takes of each limit, so that under a
// bandwidth limit hosts share bytes, not commands.
func (g *qosGate) charge(h *qosHost, c *qosCost) {
	for i := range numBuckets {
		b := &g.buckets.b[i]
		if b.rate == 0 || c[i] == 0 {
			continue
		}
		start := max(g.vtime[i], h.finish[i])
		h.finish[i] = start + c[i]/b.rate
		g.vtime[i] = start
	}
}

// popLocked takes the head waiter of f off the gate.
func (g *qosGate) popLocked(f *qosFIFO) *Request {
	r := f.pop()
	g.waiting--
	if f.head == nil {
		i := slices.Index(g.active, f)
		g.active = slices.Delete(g.active, i, i+1)
	}
	return r
}

// grantLocked hands r, taken off the gate, back to its poller to resume.
func (g *qosGate) grantLocked(r *Request, now time.Duration) {
	g.stats.waitNanos.Add(uint64(max(0, now-r.qos.since)))
	r.qos.granted = true
	handBack(r)
}

// handBack gives r, taken off the gate, to its poller: to resume if
// granted, else to complete with r.status.
func handBack(r *Request) {
	q := r.q
	q.done <- r // room for every request: never blocks
	q.tr.Wake()
	q.unhold()
}

// armLocked arms the timer to fire d from now (d < 0: nothing waits, it
// need not fire), unless it fires sooner already.
func (g *qosGate) armLocked(now, d time.Duration) {
	if d < 0 {
		if g.armed {
			g.timer.Stop()
			g.armed = false
		}
		return
	}
	d = max(d, qosMinTick)
	if g.armed && g.at <= now+d {
		return
	}
	g.armed, g.at = true, now+d
	if g.timer != nil && g.reset != nil {
		g.reset(d)
		return
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	g.timer = g.clock.AfterFunc(d, g.fire)
	if rs, ok := g.timer.(interface{ Reset(time.Duration) bool }); ok {
		g.reset = rs.Reset
	}
}

// setLimits changes the limits in place: waiters keep their order and go
// at the new rate.
func (g *qosGate) setLimits(l QoSLimits) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.limits = l
	g.buckets.set(l, g.now())
	g.settleLocked()
}

// openUp lets every waiter go at once and every later command pass: the
// limits were removed, or the namespace is.
func (g *qosGate) openUp() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = true
	now := g.now()
	for len(g.active) > 0 {
		g.grantLocked(g.popLocked(g.active[0]), now)
	}
	g.armLocked(now, -1)
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
	g.settleLocked()
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
	}, handBack) > 0 {
		g.settleLocked()
	}
}

// abortWaiter ends q's command cid with Command Aborted by Request if it
// waits on the QoS limit of a namespace q used, reporting whether it did.
// It runs on the admin queue's poller: the command goes back to its own.
func (q *Queue) abortWaiter(cid uint16) bool {
	list := q.nsStats.Load()
	if list == nil {
		return false
	}
	for _, e := range *list {
		if g := e.ns.qos.gate.Load(); g != nil && g.abort(q, cid) {
			return true
		}
	}
	return false
}

// abort ends q's waiter cid, if it waits here.
func (g *qosGate) abort(q *Queue, cid uint16) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removeLocked(func(r *Request) bool { return r.q == q && r.Cmd.CID() == cid }, func(r *Request) {
		r.status = nvme.StatusAbortRequested
		handBack(r)
	}) == 0 {
		return false
	}
	g.settleLocked()
	return true
}

// removeLocked takes every waiter that match selects off the gate,
// keeping the others' order and turns, and hands each to gone. It
// reports how many went. Called with g.mu held.
func (g *qosGate) removeLocked(match func(*Request) bool, gone func(*Request)) int {
	n := 0
	for i := 0; i < len(g.active); {
		f := g.active[i]
		var prev *Request
		for r := f.head; r != nil; {
			next := r.qos.next
			if !match(r) {
				prev = r
				r = next
				continue
			}
			if prev == nil {
				f.head = next
			} else {
				prev.qos.next = next
			}
			r.qos.next = nil
			g.waiting--
			n++
			gone(r)
			r = next
		}
		f.tail = prev
		if f.head != nil {
			i++
			continue
		}
		g.active = slices.Delete(g.active, i, i+1)
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
		q.Fail(r, st) // a fused second's first fails with it
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
	TimedOut  uint64        // commands that waited qosMaxWait and were ended
}

// QoSStats reads the namespace's QoS counters.
func (ns *Namespace) QoSStats() QoSStats {
	s := QoSStats{Throttled: ns.qos.throttled.Load(), Waited: time.Duration(ns.qos.waitNanos.Load()),
		TimedOut: ns.qos.timedOut.Load()}
	if g := ns.qos.gate.Load(); g != nil {
		g.mu.Lock()
		s.Waiting = g.waiting
		g.mu.Unlock()
	}
	return s
}
