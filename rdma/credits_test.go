package rdma

import (
	"math/rand"
	"testing"
)

// A response that does not fit waits, and so does every later one, even
// one small enough to fit: responses leave in the order they completed.
func TestSendBudgetKeepsOrder(t *testing.T) {
	b := newSendBudget(8, 4, 8)
	c1, ok := b.trySend(1, 5) // 6 slots
	if !ok {
		t.Fatal("first response refused with the send queue empty")
	}
	if _, ok := b.trySend(2, 3); ok { // 4 slots: 10 > 8
		t.Fatal("second response took slots the send queue does not have")
	}
	if _, ok := b.trySend(3, 0); ok { // 1 slot would fit, but 2 waits
		t.Fatal("a later response overtook a waiting one")
	}
	if _, _, ok := b.next(); ok {
		t.Fatal("next handed out credits before any came back")
	}
	b.retire(c1)
	var got []int32
	for c, read, ok := b.next(); ok; c, read, ok = b.next() {
		if read {
			t.Fatalf("request %d came back as a read", c.tag)
		}
		got = append(got, c.tag)
	}
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("waiting responses went in order %v, want [2 3]", got)
	}
	if b.slots != 5 {
		t.Fatalf("%d slots held, want 5", b.slots)
	}
}

// RDMA READs are bounded by the initiator depth as well as by slots, a
// chain longer than the depth runs alone, and waiting responses go first.
func TestSendBudgetReads(t *testing.T) {
	b := newSendBudget(64, 4, 8)
	r1, ok := b.tryRead(1, 3)
	if !ok || r1.reads != 3 {
		t.Fatalf("first read chain: %+v %v", r1, ok)
	}
	if _, ok := b.tryRead(2, 2); ok {
		t.Fatal("5 RDMA READs in flight with an initiator depth of 4")
	}
	if _, ok := b.trySend(3, 0); !ok {
		t.Fatal("a response waited although no response was waiting and slots were free")
	}
	b.retire(r1)
	c, read, ok := b.next()
	if !ok || !read || c.tag != 2 {
		t.Fatalf("next after the reads finished: %+v read=%v ok=%v, want read chain 2", c, read, ok)
	}
	b.retire(c)
	// 16 READs against a depth of 4: charged the whole depth, alone.
	long, ok := b.tryRead(4, 16)
	if !ok || long.reads != 4 || long.slots != 16 {
		t.Fatalf("long chain: %+v %v", long, ok)
	}
	if _, ok := b.tryRead(5, 1); ok {
		t.Fatal("a read ran beside a chain that holds the whole read depth")
	}
	// A response now waits for slots; the waiting read must not pass it.
	b2 := newSendBudget(4, 4, 8)
	s1, _ := b2.trySend(1, 3)
	b2.tryRead(2, 1)
	b2.trySend(3, 1)
	b2.retire(s1)
	if c, read, ok := b2.next(); !ok || read || c.tag != 3 {
		t.Fatalf("got %+v read=%v ok=%v, want response 3 before read 2", c, read, ok)
	}
}

// A simulated queue pair at full depth, every command carrying up to 16
// keyed descriptors as SPDK's initiator sends them: the send queue never
// holds more than it was sized for, no more RDMA READs are in flight than
// the initiator depth, and every command completes. Without the budget
// (post whatever comes) the simulated ibv_post_send fails.
func TestSendBudgetFullDepthSimulation(t *testing.T) {
	const (
		depth    = 128
		nreq     = 2 * depth
		commands = 20000
	)
	sim := newBudgetSim(t, nreq, 2*nreq+1, 16)
	rng := rand.New(rand.NewSource(1))
	started, done := 0, 0
	for done < commands {
		// The host keeps depth commands outstanding.
		for started-done < depth && started < commands && len(sim.free) > 0 {
			sim.start(1+rng.Intn(16), rng.Intn(2) == 0)
			started++
		}
		if len(sim.inflight) == 0 {
			t.Fatalf("stalled: nothing in flight, %d started, %d done, %d+%d waiting",
				started, done, sim.b.sendWait.size, sim.b.readWait.size)
		}
		if sim.completeOldest() {
			done++
		}
	}
	if sim.b.slots != sim.posted || sim.b.reads < 0 {
		t.Fatalf("budget says %d slots held, %d are posted", sim.b.slots, sim.posted)
	}
}

// budgetSim is a queue pair's send queue as the budget sees it: chains
// posted in order and completing in order, commands with their number of
// descriptors and direction.
type budgetSim struct {
	t                   *testing.T
	b                   sendBudget
	sqSize, readMax     int
	inflight            []simChain // posted, completing in order
	posted, readsPosted int
	descs               []int
	writes              []bool
	free                []int32
}

type simChain struct {
	c    charge
	read bool
}

func newBudgetSim(t *testing.T, nreq, sqSize, readMax int) *budgetSim {
	s := &budgetSim{t: t, b: newSendBudget(sqSize, readMax, nreq), sqSize: sqSize, readMax: readMax,
		descs: make([]int, nreq), writes: make([]bool, nreq), free: make([]int32, 0, nreq)}
	for i := range nreq {
		s.free = append(s.free, int32(i))
	}
	return s
}

// post puts a chain on the send queue, checking the device's limits.
func (s *budgetSim) post(c charge, read bool) {
	s.posted += int(c.slots)
	if read {
		s.readsPosted += int(c.slots)
	}
	if s.posted > s.sqSize {
		s.t.Fatalf("ibv_post_send would fail: %d work requests on a send queue of %d", s.posted, s.sqSize)
	}
	if s.readsPosted > s.readMax && int(c.slots) <= s.readMax {
		s.t.Fatalf("%d RDMA READs in flight, initiator depth %d", s.readsPosted, s.readMax)
	}
	s.inflight = append(s.inflight, simChain{c, read})
}

// start runs a new command: a write reads the host's data first, a read
// responds at once.
func (s *budgetSim) start(descs int, write bool) {
	tag := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.descs[tag], s.writes[tag] = descs, write
	if !write {
		s.respond(tag)
		return
	}
	if c, ok := s.b.tryRead(tag, descs); ok {
		s.post(c, true)
	}
}

func (s *budgetSim) respond(tag int32) {
	n := 0
	if !s.writes[tag] {
		n = s.descs[tag] // a read command: WRITEs, then the SEND
	}
	if c, ok := s.b.trySend(tag, n); ok {
		s.post(c, false)
	}
}

// completeOldest completes the oldest chain and posts what then fits. It
// reports whether a command finished.
func (s *budgetSim) completeOldest() bool {
	ch := s.inflight[0]
	s.inflight = s.inflight[1:]
	s.posted -= int(ch.c.slots)
	if ch.read {
		s.readsPosted -= int(ch.c.slots)
	}
	s.b.retire(ch.c)
	finished := !ch.read
	if ch.read {
		s.respond(ch.c.tag) // executed at once; its response follows
	} else {
		s.free = append(s.free, ch.c.tag)
	}
	for c, read, ok := s.b.next(); ok; c, read, ok = s.b.next() {
		s.post(c, read)
	}
	return finished
}
