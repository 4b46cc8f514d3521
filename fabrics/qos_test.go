package fabrics

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// runBuckets drives buckets as a host that always has a command of cost c
// ready would, for d on the buckets' own clock: a command goes as soon as
// it fits. It returns how many went.
func runBuckets(q *qosBuckets, c qosCost, d time.Duration) int {
	end := q.last + d
	now := q.last
	n := 0
	for {
		q.refill(now, false)
		if q.fits(&c) {
			q.take(&c)
			n++
			continue
		}
		now += max(q.wait(&c), 1)
		if now > end {
			return n
		}
	}
}

// The buckets hold every limit within 1 % over 10 s (the burst of 100 ms
// on top), for reads and writes of 4 KiB and 128 KiB, IOPS and bandwidth.
func TestQoSBucketRate(t *testing.T) {
	const d = 10 * time.Second
	for _, tc := range []struct {
		name   string
		limits QoSLimits
		dir    DataDir
		size   uint32
		rate   float64 // commands per second the limit allows
	}{
		{"iops read 4k", QoSLimits{IOPS: 400}, DirCtrlToHost, 4096, 400},
		{"iops write 128k", QoSLimits{IOPS: 400}, DirHostToCtrl, 128 << 10, 400},
		{"read iops", QoSLimits{ReadIOPS: 250}, DirCtrlToHost, 4096, 250},
		{"write iops", QoSLimits{WriteIOPS: 250}, DirHostToCtrl, 4096, 250},
		{"bandwidth read 4k", QoSLimits{Bandwidth: 4 << 20}, DirCtrlToHost, 4096, 1024},
		{"bandwidth write 128k", QoSLimits{Bandwidth: 4 << 20}, DirHostToCtrl, 128 << 10, 32},
		{"read bandwidth 128k", QoSLimits{ReadBandwidth: 2 << 20}, DirCtrlToHost, 128 << 10, 16},
		{"write bandwidth 4k", QoSLimits{WriteBandwidth: 2 << 20}, DirHostToCtrl, 4096, 512},
		// A burst smaller than one command: each goes once the bucket
		// is full, and the debt it leaves keeps the rate.
		{"bandwidth below one command", QoSLimits{Bandwidth: 1 << 20}, DirCtrlToHost, 128 << 10, 8},
		// Several limits: the tightest holds.
		{"iops and bandwidth", QoSLimits{IOPS: 1000, Bandwidth: 4 << 20}, DirCtrlToHost, 128 << 10, 32},
		{"iops tighter than bandwidth", QoSLimits{IOPS: 100, Bandwidth: 4 << 20}, DirCtrlToHost, 4096, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q qosBuckets
			q.set(tc.limits, 0)
			n := runBuckets(&q, costOf(tc.dir, tc.size), d)
			want := tc.rate * d.Seconds()
			if got := float64(n); got < want || got > want*1.011+1 {
				t.Fatalf("%d commands in %v, want %.0f (+1 %% burst)", n, d, want)
			}
		})
	}
}

// A limit of one direction leaves the other alone.
func TestQoSBucketDirections(t *testing.T) {
	var q qosBuckets
	q.set(QoSLimits{ReadIOPS: 10, WriteBandwidth: 4096}, 0)
	if n := runBuckets(&q, costOf(DirHostToCtrl, 512), time.Second); n < 8 || n > 9 {
		t.Fatalf("%d writes of 512 bytes in 1 s at 4096 B/s (burst 409 B), want 8", n)
	}
	q.set(QoSLimits{ReadIOPS: 10, WriteBandwidth: 4096}, 0)
	if n := runBuckets(&q, costOf(DirCtrlToHost, 1<<20), time.Second); n != 11 {
		t.Fatalf("%d reads of 1 MiB in 1 s at 10 read IOPS and a write bandwidth limit, want 11 (burst 1)", n)
	}
	var none qosBuckets
	none.set(QoSLimits{ReadIOPS: 10}, 0)
	c := costOf(DirNone, 0)
	for range 1000 {
		if !none.fits(&c) {
			t.Fatal("a flush waited on a read IOPS limit")
		}
		none.take(&c)
	}
}

// The burst: after an idle spell, 100 ms worth of commands go at once,
// and no more; it refills at the rate.
func TestQoSBucketBurst(t *testing.T) {
	var q qosBuckets
	q.set(QoSLimits{IOPS: 400}, 0)
	q.refill(time.Hour, false)
	c := costOf(DirCtrlToHost, 4096)
	n := 0
	for q.fits(&c) {
		q.take(&c)
		n++
	}
	if n != 40 {
		t.Fatalf("burst of %d commands after an idle hour, want 40 (100 ms at 400 IOPS)", n)
	}
	if w := q.wait(&c); w != 2500*time.Microsecond {
		t.Fatalf("next command in %v, want 2.5 ms", w)
	}
}

// While commands wait, a late refill (the timer delayed by a CPU stall)
// keeps what accrued, up to a second of the rate, so the rate holds; an
// idle bucket keeps its burst only.
func TestQoSBucketCatchUp(t *testing.T) {
	c := costOf(DirCtrlToHost, 4096)
	drain := func(q *qosBuckets) int {
		n := 0
		for q.fits(&c) {
			q.take(&c)
			n++
		}
		return n
	}
	var q qosBuckets
	q.set(QoSLimits{IOPS: 100}, 0)
	drain(&q)
	q.refill(500*time.Millisecond, true)
	if n := drain(&q); n != 50 {
		t.Fatalf("%d commands after a timer 500 ms late with commands waiting, want 50", n)
	}
	q.refill(5*time.Second, true)
	if n := drain(&q); n != 100 {
		t.Fatalf("%d commands after a 4.5 s stall with commands waiting, want 100 (1 s of the rate)", n)
	}
	q.refill(5500*time.Millisecond, false)
	if n := drain(&q); n != 10 {
		t.Fatalf("%d commands after 500 ms idle, want the burst of 10", n)
	}
}

// A change of limits applies to the next command, and what the bucket
// holds stays (up to the new burst).
func TestQoSBucketLimitChange(t *testing.T) {
	var q qosBuckets
	q.set(QoSLimits{IOPS: 100}, 0)
	c := costOf(DirCtrlToHost, 4096)
	if n := runBuckets(&q, c, time.Second); n < 100 || n > 111 {
		t.Fatalf("%d commands in 1 s at 100 IOPS", n)
	}
	q.set(QoSLimits{IOPS: 1000}, q.last)
	if n := runBuckets(&q, c, time.Second); n < 1000 || n > 1001 {
		t.Fatalf("%d commands in 1 s after raising the limit to 1000 IOPS", n)
	}
	q.set(QoSLimits{IOPS: 50}, q.last)
	if n := runBuckets(&q, c, 2*time.Second); n < 100 || n > 106 {
		t.Fatalf("%d commands in 2 s after lowering the limit to 50 IOPS", n)
	}
}

// qosRig is a target on a manual clock with hosts of their own NQN.
type qosRig struct {
	t    *testing.T
	tg   *Target
	p    *Port
	s    *Subsystem
	ns   *Namespace
	clk  *ManualClock
	done chan string // the tag of each completed command
}

func newQoSRig(t *testing.T, l QoSLimits) *qosRig {
	tg, p, _ := testTarget(t)
	clk := &ManualClock{}
	tg.SetClock(clk)
	s := tg.Subsystem(testNQN)
	if err := s.SetQoS(1, l); err != nil {
		t.Fatal(err)
	}
	return &qosRig{t: t, tg: tg, p: p, s: s, ns: s.Namespace(1), clk: clk, done: make(chan string, 1024)}
}

// host connects a controller for hostNQN with n I/O queues.
func (g *qosRig) host(hostNQN string, n int) []*LoopQueue {
	_, qs := g.hostAdmin(hostNQN, n)
	return qs
}

// hostAdmin is host, and the controller's admin queue.
func (g *qosRig) hostAdmin(hostNQN string, n int) (*LoopQueue, []*LoopQueue) {
	t := g.t
	admin := NewLoopQueue(g.tg, g.p, 0, 32)
	t.Cleanup(admin.Close)
	rsp, err := admin.Submit(connectCmd(0, 31, 0, false), connectData(testNQN, hostNQN, 0xffff))
	if err != nil || rsp.Status() != 0 {
		t.Fatalf("admin connect: %v %v", err, rsp)
	}
	cntl := uint16(rsp.Result())
	c := newCmd(0)
	c.SetProperty(true, false, nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
	admin.Submit(c, nil)
	qs := make([]*LoopQueue, n)
	for i := range qs {
		qid := uint16(i + 1)
		qs[i] = NewLoopQueue(g.tg, g.p, qid, 128)
		t.Cleanup(qs[i].Close)
		rsp, err := qs[i].Submit(connectCmd(qid, 127, 0, true), connectData(testNQN, hostNQN, cntl))
		if err != nil || rsp.Status() != 0 {
			t.Fatalf("io connect qid %d: %v %v", qid, err, rsp)
		}
	}
	return admin, qs
}

// read submits a 512-byte read on lq; its tag goes to g.done once it
// completes.
func (g *qosRig) read(lq *LoopQueue, tag string) {
	g.submit(lq, ioCmd(nvme.IORead, 1, 0, 1, 512), 512, tag)
}

// submit submits c, with n bytes of data, on lq; its tag, with the
// status if it failed, goes to g.done once it completes.
func (g *qosRig) submit(lq *LoopQueue, c nvme.Command, n int, tag string) {
	ch := lq.SubmitAsync(c, make([]byte, n))
	go func() {
		if rsp := <-ch; rsp != nil && rsp.Status() != 0 {
			tag += fmt.Sprintf(" failed %v", rsp.Status())
		}
		g.done <- tag
	}()
}

// next is the tag of the next command to complete.
func (g *qosRig) next() string {
	g.t.Helper()
	select {
	case tag := <-g.done:
		return tag
	case <-time.After(10 * time.Second):
		g.t.Fatalf("no command completed in 10 s; %d wait on the limit", g.waiting())
		return ""
	}
}

// completions takes n completions, in order.
func (g *qosRig) completions(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = g.next()
	}
	return out
}

func (g *qosRig) waiting() int { return g.ns.QoSStats().Waiting }

// expectNext checks that the next command to complete is the one tagged
// tag; what says which that is, for the failure.
func (g *qosRig) expectNext(tag, what string) {
	g.t.Helper()
	if got := g.next(); got != tag {
		g.t.Fatalf("completion %q, want %s", got, what)
	}
}

// noTimers checks that no timer is armed on the rig's clock; when says
// when none should be, for the failure.
func (g *qosRig) noTimers(when string) {
	g.t.Helper()
	if n := g.clk.Pending(); n != 0 {
		g.t.Fatalf("%d timers armed %s", n, when)
	}
}

// spendBurst reads n blocks on lq, the limit's burst, and waits for them.
func (g *qosRig) spendBurst(lq *LoopQueue, n int) {
	g.t.Helper()
	for range n {
		g.read(lq, "burst")
	}
	g.completions(n)
}

// Commands over the limit wait, holding no data buffer, and go at the
// rate, in the order they came; the counters say how many waited and how
// long.
func TestQoSGateRate(t *testing.T) {
	g := newQoSRig(t, QoSLimits{IOPS: 100}) // a burst of 10
	q := g.host(testHost, 1)[0]
	for i := range 30 {
		g.read(q, fmt.Sprint(i))
	}
	g.completions(10) // the burst, run at once (on workers: in any order)
	if n := g.waiting(); n != 20 {
		t.Fatalf("%d commands wait, want 20", n)
	}
	gate := g.ns.qos.gate.Load()
	gate.mu.Lock()
	for _, f := range gate.active {
		for r := f.head; r != nil; r = r.qos.next {
			if r.Data != nil {
				t.Errorf("a waiting command holds a data buffer of %d bytes", len(r.Data))
			}
		}
	}
	gate.mu.Unlock()
	for i := 10; i < 30; i++ {
		g.clk.Advance(10 * time.Millisecond)
		if tag := g.next(); tag != fmt.Sprint(i) {
			t.Fatalf("completion %d is %q", i, tag)
		}
		if n := g.waiting(); n != 29-i {
			t.Fatalf("after %d ms %d commands wait, want %d", (i-9)*10, n, 29-i)
		}
	}
	st := g.ns.QoSStats()
	// The waits are 10, 20 ... 200 ms: 2.1 s in all.
	if st.Throttled != 20 || st.Waited != 2100*time.Millisecond {
		t.Fatalf("stats %+v, want 20 throttled, 2.1 s waited", st)
	}
	g.noTimers("with nothing waiting")
}

// Hosts take turns: a host with two queues full of commands gets the same
// share as one with a single queue, which is not served only after the
// first host's backlog.
func TestQoSFairnessBetweenHosts(t *testing.T) {
	g := newQoSRig(t, QoSLimits{IOPS: 100})
	a := g.host(testHost, 2)
	b := g.host(qosHostB, 1)[0]
	for range 20 {
		g.read(a[0], "a")
		g.read(a[1], "a")
	}
	g.completions(10) // the burst
	for range 5 {
		g.read(b, "b")
	}
	var order string
	for range 10 {
		g.clk.Advance(10 * time.Millisecond)
		order += g.next()
	}
	if order != "ababababab" {
		t.Fatalf("grants %q, want the hosts in turn", order)
	}
}

// Within a host, commands go in the order they came, whatever their queue.
func TestQoSFairnessBetweenQueues(t *testing.T) {
	g := newQoSRig(t, QoSLimits{IOPS: 100})
	qs := g.host(testHost, 3)
	g.spendBurst(qs[0], 10)
	var want []string
	for i := range 12 {
		tag := fmt.Sprintf("q%d-%d", i%3, i)
		want = append(want, tag)
		g.read(qs[i%3], tag)
	}
	for i := range want {
		g.clk.Advance(10 * time.Millisecond)
		if tag := g.next(); tag != want[i] {
			t.Fatalf("grant %d is %s, want %s", i, tag, want[i])
		}
	}
}

// A live change of the limits applies to the commands already waiting;
// removing them lets every waiter go at once.
func TestQoSGateLimitChange(t *testing.T) {
	g := newQoSRig(t, QoSLimits{IOPS: 10}) // a burst of 1
	q := g.host(testHost, 1)[0]
	for range 101 {
		g.read(q, "r")
	}
	g.completions(1)
	g.clk.Advance(time.Second)
	g.completions(10)
	if err := g.s.SetQoS(1, QoSLimits{IOPS: 100}); err != nil {
		t.Fatal(err)
	}
	if got := g.ns.QoS(); got != (QoSLimits{IOPS: 100}) {
		t.Fatalf("limits %+v after the change", got)
	}
	g.clk.Advance(500 * time.Millisecond)
	g.completions(50)
	if n := g.waiting(); n != 40 {
		t.Fatalf("%d wait after 0.5 s at 100 IOPS, want 40", n)
	}
	if err := g.s.SetQoS(1, QoSLimits{}); err != nil {
		t.Fatal(err)
	}
	g.completions(40)
	if g.ns.qos.gate.Load() != nil || g.waiting() != 0 {
		t.Fatal("a gate left after the limits were removed")
	}
	g.read(q, "free")
	if tag := g.next(); tag != "free" {
		t.Fatalf("completion %q without limits", tag)
	}
	g.noTimers("without limits")
}

// A queue closed with commands waiting on the limit closes at once: its
// waiters leave the gate, and the other queues' waiters keep their turn
// and their claim on the namespace.
func TestQoSTeardownWithWaiters(t *testing.T) {
	g := newQoSRig(t, QoSLimits{IOPS: 100})
	qs := g.host(testHost, 2)
	g.spendBurst(qs[0], 10)
	for range 5 {
		g.read(qs[0], "closed")
		g.read(qs[1], "kept")
	}
	closed := make(chan struct{})
	go func() {
		qs[0].Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("closing a queue with commands waiting on the limit hangs")
	}
	for range 5 {
		if tag := g.next(); tag != "closed" {
			t.Fatalf("%q completed before the closed queue's waiters ended", tag)
		}
	}
	if n := g.waiting(); n != 5 {
		t.Fatalf("%d wait after the close, want the other queue's 5", n)
	}
	if n := g.ns.InFlight(); n != 5 {
		t.Fatalf("%d claims on the namespace, want the kept queue's 5", n)
	}
	g.clk.Advance(50 * time.Millisecond)
	for range 5 {
		g.expectNext("kept", "the kept queue's")
	}
	if n := g.ns.InFlight(); n != 0 {
		t.Fatalf("%d claims left on the namespace", n)
	}
}

// Removing a namespace whose commands wait on its limit lets them run
// first instead of waiting for the rate: the removal returns at once.
func TestQoSRemoveNamespaceWithWaiters(t *testing.T) {
	g := newQoSRig(t, QoSLimits{IOPS: 1})
	q := g.host(testHost, 1)[0]
	for range 20 {
		g.read(q, "r")
	}
	g.completions(1)
	removed := make(chan error)
	go func() { removed <- g.s.RemoveNamespace(1) }()
	select {
	case err := <-removed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("removing a namespace with commands waiting on its limit hangs")
	}
	for _, tag := range g.completions(19) {
		if tag != "r" {
			t.Fatalf("a waiter ended %q", tag)
		}
	}
}

// resumeTransport is nullTransport that resumes a command the QoS gate let
// go as the loop transport does: maps its data and executes it.
type resumeTransport struct {
	nullTransport
	q   *Queue
	buf []byte
}

func (t *resumeTransport) Resume(r *Request) {
	r.Data = t.buf[:r.Len]
	t.q.Execute(r)
}

// qosBenchQueue is an I/O queue on a Resumer, on a limited namespace.
func qosBenchQueue(b testing.TB, l QoSLimits) (*Queue, *resumeTransport, *ManualClock) {
	tg, p, s, cntlid := benchController(b)
	clk := &ManualClock{}
	tg.SetClock(clk)
	if err := s.SetQoS(1, l); err != nil {
		b.Fatal(err)
	}
	tr := &resumeTransport{buf: make([]byte, MaxDataTransfer)}
	q := NewQueue(tg, p, 1, 128, tr)
	tr.q = q
	r := &Request{Cmd: connectCmd(1, 127, 0, true), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	q.Prepare(r)
	r.MapInline(connectData(s.NQN, testHost, cntlid))
	q.Execute(r)
	if r.status != 0 {
		b.Fatalf("io connect: %v", r.status)
	}
	tr.completed = 0
	b.Cleanup(q.Close)
	return q, tr, clk
}

// A command that waits on the limit and is let go allocates nothing: not
// the wait, not the timer, not the handoff.
func TestQoSWaitAllocatesNothing(t *testing.T) {
	q, tr, clk := qosBenchQueue(t, QoSLimits{IOPS: 100})
	r := &Request{Cmd: ioCmd(nvme.IORead, 1, 0, 8, 4096), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	for range 10 { // the burst
		q.Prepare(r)
		tr.Resume(r)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if q.Prepare(r) {
			t.Fatal("a command over the limit did not wait")
		}
		clk.Advance(10 * time.Millisecond)
		q.Reap()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per command that waited", allocs)
	}
	if tr.completed != 10+101 { // AllocsPerRun runs once more to warm up
		t.Fatalf("%d completions of 111 commands", tr.completed)
	}
}

// BenchmarkQoSReadPath is BenchmarkReadPath on a limited namespace whose
// limit is never reached: the cost of the gate itself. It must not
// allocate.
func BenchmarkQoSReadPath(b *testing.B) {
	q, tr, _ := qosBenchQueue(b, QoSLimits{IOPS: 1 << 40, Bandwidth: 1 << 50})
	measureIOLoop(b, q, nvme.IORead, &tr.completed)
}

// A queue that closes while the gate's timer has let its waiters go, but
// its poller has not taken them up, drops them with their namespace
// claims: a removal's drain does not count them.
func TestQoSCloseWithReleasedWaiters(t *testing.T) {
	g := newQoSRig(t, QoSLimits{IOPS: 100})
	lq := g.host(testHost, 1)[0]
	g.spendBurst(lq, 10)
	for range 5 {
		g.read(lq, "released")
	}
	var stats *IOStats
	for _, e := range *lq.Queue.nsStats.Load() {
		if e.ns == g.ns {
			stats = e.stats
		}
	}
	lq.mu.Lock() // the poller waits: what the timer lets go stays in the handoff
	g.clk.Advance(50 * time.Millisecond)
	if n := g.waiting(); n != 0 || len(lq.Queue.done) != 5 {
		t.Fatalf("%d waiting, %d in the handoff; want 0 and 5", n, len(lq.Queue.done))
	}
	lq.closeOnce.Do(func() {
		lq.Disconnect()
		lq.Queue.Close()
	})
	lq.mu.Unlock()
	if n := stats.Inflight.Load(); n != 0 {
		t.Fatalf("%d claims left by the dropped commands", n)
	}
	for range 5 {
		if tag := g.next(); tag != "released" {
			t.Fatalf("completion %q", tag)
		}
	}
}

// qosHostB is a second host for the tests of turns between hosts.
const qosHostB = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000002"

// A limit holds only the commands it applies to: a write waiting on a
// write limit holds no read or flush, of its host or another; a timer run
// lets go whatever fits, not only up to the first command that does not;
// a limit of every command still takes them in their order, hosts in turn.
func TestQoSLanes(t *testing.T) {
	t.Run("write limit holds no read", qosWriteLimitHoldsNoRead)
	t.Run("release past a lane that does not fit", qosReleasePastALane)
	t.Run("shared limit in order", qosSharedLimitInOrder)
}

// blockWrite is a one-block write to namespace 1.
func blockWrite() nvme.Command { return ioCmd(nvme.IOWrite, 1, 0, 1, 512) }

// qosWriteLimitHoldsNoRead: a write waiting on the write limit holds up
// no read nor flush.
func qosWriteLimitHoldsNoRead(t *testing.T) {
	g := newQoSRig(t, QoSLimits{WriteIOPS: 10}) // a burst of 1
	a := g.host(testHost, 1)[0]
	b := g.host(qosHostB, 1)[0]
	g.submit(a, blockWrite(), 512, "w0")
	g.expectNext("w0", "the write of the burst")
	g.submit(a, blockWrite(), 512, "w1")
	for range 5 {
		g.read(a, "read a")
		g.read(b, "read b")
		g.submit(b, flushCmd(1), 0, "flush b")
	}
	for range 15 {
		if tag := g.next(); tag != "read a" && tag != "read b" && tag != "flush b" {
			t.Fatalf("completion %q while a write waits on the write limit, want the reads and flushes", tag)
		}
	}
	if n := g.waiting(); n != 1 {
		t.Fatalf("%d wait, want the write", n)
	}
	g.clk.Advance(100 * time.Millisecond)
	g.expectNext("w1", "the write")
}

// qosReleasePastALane: a read waiting on the read limit holds up no write
// the write limit lets go.
func qosReleasePastALane(t *testing.T) {
	g := newQoSRig(t, QoSLimits{ReadIOPS: 10, WriteIOPS: 100}) // bursts of 1 and 10
	a := g.host(testHost, 1)[0]
	g.read(a, "burst")
	for range 10 {
		g.submit(a, blockWrite(), 512, "burst")
	}
	g.completions(11)
	g.read(a, "r") // goes in 100 ms
	for i := range 5 {
		g.submit(a, blockWrite(), 512, fmt.Sprint("w", i)) // one each 10 ms
	}
	for i := range 5 {
		g.clk.Advance(10 * time.Millisecond)
		if tag := g.next(); tag != fmt.Sprint("w", i) {
			t.Fatalf("completion %q after %d ms, want w%d: the read waiting on the read limit holds it", tag, (i+1)*10, i)
		}
	}
	g.clk.Advance(50 * time.Millisecond)
	g.expectNext("r", "the read")
}

// qosSharedLimitInOrder: on one limit for all kinds, the hosts take turns
// and each host's commands go in the order they came.
func qosSharedLimitInOrder(t *testing.T) {
	g := newQoSRig(t, QoSLimits{IOPS: 100})
	a := g.host(testHost, 1)[0]
	b := g.host(qosHostB, 1)[0]
	g.spendBurst(a, 10)
	var want []string
	for i := range 6 {
		tag := fmt.Sprint("a", i)
		switch i % 3 {
		case 0:
			g.read(a, tag)
		case 1:
			g.submit(a, blockWrite(), 512, tag)
		default:
			g.submit(a, flushCmd(1), 0, tag)
		}
		want = append(want, tag)
	}
	for i := range 6 {
		g.submit(b, blockWrite(), 512, fmt.Sprint("b", i))
	}
	// The hosts take turns; each host's commands go in the order
	// they came, whatever their kind.
	for i := range 12 {
		g.clk.Advance(10 * time.Millisecond)
		w := fmt.Sprint("b", i/2)
		if i%2 == 0 {
			w = want[i/2]
		}
		if tag := g.next(); tag != w {
			t.Fatalf("grant %d is %q, want %q", i, tag, w)
		}
	}
}

// Under a bandwidth limit hosts share bytes, not commands: a host sending
// 1 MiB reads and one sending 4 KiB reads, both keeping their queues full,
// each get about half the bytes.
func TestQoSFairnessByBytes(t *testing.T) {
	g := newQoSRig(t, QoSLimits{Bandwidth: 1 << 20})
	a := g.host(testHost, 1)[0]
	b := g.host(qosHostB, 2)
	submitted := 0
	send := func(tag string) {
		submitted++
		if tag == "a" {
			g.submit(a, ioCmd(nvme.IORead, 1, 0, 2048, 1<<20), 1<<20, tag)
			return
		}
		g.submit(b[submitted%2], ioCmd(nvme.IORead, 1, 0, 8, 4096), 4096, tag)
	}
	for range 8 {
		send("a")
	}
	for range 128 {
		send("b")
	}
	const step, warmup, window = 10 * time.Millisecond, time.Second, 20 * time.Second
	bytes := map[string]int{}
	drained := 0
	for at := step; at <= warmup+window; at += step {
		g.clk.Advance(step)
		for granted := submitted - g.waiting(); drained < granted; drained++ {
			tag := g.next()
			if at > warmup {
				bytes[tag] += map[string]int{"a": 1 << 20, "b": 4096}[tag]
			}
			send(tag) // the host keeps its queue full
		}
	}
	lo, hi := min(bytes["a"], bytes["b"]), max(bytes["a"], bytes["b"])
	if float64(lo) < 0.8*float64(hi) {
		t.Fatalf("in %v at 1 MiB/s the host of 1 MiB reads got %d B, the host of 4 KiB reads %d B: want them within 20 %%", window, bytes["a"], bytes["b"])
	}
}

// Abort ends a command waiting on a QoS limit with Command Aborted by
// Request, and answers that it did (Dword 0 bit 0 cleared); a command that
// is not waiting, or not there, is not aborted.
func TestQoSAbortWaiter(t *testing.T) {
	g := newQoSRig(t, QoSLimits{IOPS: 1}) // a burst of 1
	admin, qs := g.hostAdmin(testHost, 1)
	read := func(cid uint16, tag string) {
		c := ioCmd(nvme.IORead, 1, 0, 1, 512)
		c.SetCID(cid)
		g.submit(qs[0], c, 512, tag)
	}
	abort := func(sqid, cid uint16) uint64 {
		t.Helper()
		c := newCmd(nvme.AdminAbort)
		c.SetAbort(sqid, cid)
		rsp, err := admin.Submit(c, nil)
		if err != nil || rsp.Status() != 0 {
			t.Fatalf("abort: %v %v", err, rsp)
		}
		return rsp.Result()
	}
	read(1, "ran")
	if tag := g.next(); tag != "ran" {
		t.Fatalf("completion %q", tag)
	}
	read(2, "kept")
	read(3, "aborted")
	if res := abort(1, 3); res&nvme.AbortNotAborted != 0 {
		t.Fatalf("Abort of a command waiting on the limit answered %#x: not aborted", res)
	}
	if tag, want := g.next(), "aborted failed "+nvme.StatusAbortRequested.String(); tag != want {
		t.Fatalf("completion %q, want %q", tag, want)
	}
	for _, tc := range []struct {
		name      string
		sqid, cid uint16
	}{{"aborted already", 1, 3}, {"completed", 1, 1}, {"another queue", 2, 2}, {"the admin queue", 0, 2}} {
		if res := abort(tc.sqid, tc.cid); res&nvme.AbortNotAborted == 0 {
			t.Fatalf("Abort of SQID %d CID %d (%s) answered %#x: aborted", tc.sqid, tc.cid, tc.name, res)
		}
	}
	if n := g.waiting(); n != 1 {
		t.Fatalf("%d wait, want the command not aborted", n)
	}
	g.clk.Advance(time.Second)
	g.expectNext("kept", "the command not aborted")
}

// A command waits on a limit no longer than qosMaxWait: then it completes
// with Command Interrupted, without DNR, which the host retries, and the
// others keep their turn.
func TestQoSWaitBound(t *testing.T) {
	old := qosMaxWait
	qosMaxWait = 2500 * time.Millisecond
	t.Cleanup(func() { qosMaxWait = old })
	g := newQoSRig(t, QoSLimits{IOPS: 1}) // a burst of 1
	q := g.host(testHost, 1)[0]
	for i := range 6 {
		g.read(q, fmt.Sprint(i)) // at 0, 1, 2 s; 3 s and after is past the bound
	}
	g.expectNext("0", "the burst")
	for _, want := range []string{"1", "2"} {
		g.clk.Advance(time.Second)
		if tag := g.next(); tag != want {
			t.Fatalf("completion %q, want %q", tag, want)
		}
	}
	g.clk.Advance(500 * time.Millisecond)
	interrupted := " failed " + nvme.StatusCommandInterrupted.String()
	for range 3 {
		if tag := g.next(); !strings.HasSuffix(tag, interrupted) {
			t.Fatalf("completion %q at the bound, want it to end with %q", tag, interrupted)
		}
	}
	if st := g.ns.QoSStats(); st.TimedOut != 3 || st.Waiting != 0 {
		t.Fatalf("stats %+v, want 3 timed out, none waiting", st)
	}
	g.noTimers("with nothing waiting")
	// The bucket is full again at 3 s.
	g.read(q, "later")
	g.clk.Advance(500 * time.Millisecond)
	g.expectNext("later", "the command that came after")
}

// A fused Compare and Write pair is charged both its commands and waits
// like any other, as its second: pairs sent faster than the limit go at
// its rate instead of all at once, running up a debt that other hosts'
// commands would then wait out. A second the wait's bound ends fails its
// first with it.
func TestQoSFusedPairsWait(t *testing.T) {
	g := newQoSRig(t, QoSLimits{IOPS: 10}) // a burst of 1 command; a pair costs 2
	q := g.host(testHost, 1)[0]
	pair := func(i int) {
		c := ioCmd(nvme.IOCompare, 1, uint64(i), 1, 512)
		c.SetFlags(c.Flags() | nvme.FuseFirst)
		g.submit(q, c, 512, fmt.Sprintf("compare %d", i))
		w := ioCmd(nvme.IOWrite, 1, uint64(i), 1, 512)
		w.SetFlags(w.Flags() | nvme.FuseSecond)
		g.submit(q, w, 512, fmt.Sprintf("write %d", i))
	}
	for i := range 4 {
		pair(i)
	}
	got := g.completions(2)
	slices.Sort(got)
	if want := []string{"compare 0", "write 0"}; !slices.Equal(got, want) {
		t.Fatalf("completions %q, want the first pair's alone", got)
	}
	if n := g.waiting(); n != 3 {
		t.Fatalf("%d commands wait after the first pair, want 3 (the later pairs' seconds)", n)
	}
	g.clk.Advance(time.Second) // 6 commands' worth at 10 IOPS, and the debt
	got = g.completions(6)
	slices.Sort(got)
	if want := []string{"compare 1", "compare 2", "compare 3", "write 1", "write 2", "write 3"}; !slices.Equal(got, want) {
		t.Fatalf("completions %q after 1 s, want the other pairs', all good", got)
	}

	old := qosMaxWait
	qosMaxWait = 200 * time.Millisecond
	t.Cleanup(func() { qosMaxWait = old })
	pair(4) // the bucket is full again: runs at once, 1 in debt
	pair(5) // fits after 300 ms, past the bound
	got = g.completions(2)
	slices.Sort(got)
	if want := []string{"compare 4", "write 4"}; !slices.Equal(got, want) {
		t.Fatalf("completions %q, want the pair that fits", got)
	}
	g.clk.Advance(200 * time.Millisecond)
	got = g.completions(2)
	slices.Sort(got)
	want := []string{"compare 5 failed " + nvme.StatusFusedFail.String(), "write 5 failed " + nvme.StatusCommandInterrupted.String()}
	if !slices.Equal(got, want) {
		t.Fatalf("completions at the bound %q, want %q", got, want)
	}
}
