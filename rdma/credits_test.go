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
		sqSize   = 2*nreq + 1
		readMax  = 16
		commands = 20000
	)
	rng := rand.New(rand.NewSource(1))
	b := newSendBudget(sqSize, readMax, nreq)
	type chain struct {
		c    charge
		read bool
	}
	var inflight []chain // posted, completing in order
	posted, readsPosted := 0, 0
	post := func(c charge, read bool) {
		posted += int(c.slots)
		if read {
			readsPosted += int(c.slots)
		}
		if posted > sqSize {
			t.Fatalf("ibv_post_send would fail: %d work requests on a send queue of %d", posted, sqSize)
		}
		if readsPosted > readMax && int(c.slots) <= readMax {
			t.Fatalf("%d RDMA READs in flight, initiator depth %d", readsPosted, readMax)
		}
		inflight = append(inflight, chain{c, read})
	}
	descs := make([]int, nreq)
	writes := make([]bool, nreq)
	free := make([]int32, 0, nreq)
	for i := range nreq {
		free = append(free, int32(i))
	}
	started, done := 0, 0
	respond := func(tag int32) {
		n := 0
		if !writes[tag] {
			n = descs[tag] // a read command: WRITEs, then the SEND
		}
		if c, ok := b.trySend(tag, n); ok {
			post(c, false)
		}
	}
	for done < commands {
		// The host keeps depth commands outstanding.
		for started-done < depth && started < commands && len(free) > 0 {
			tag := free[len(free)-1]
			free = free[:len(free)-1]
			descs[tag] = 1 + rng.Intn(16)
			writes[tag] = rng.Intn(2) == 0
			started++
			if writes[tag] {
				if c, ok := b.tryRead(tag, descs[tag]); ok {
					post(c, true)
				}
			} else {
				respond(tag)
			}
		}
		if len(inflight) == 0 {
			t.Fatalf("stalled: nothing in flight, %d started, %d done, %d+%d waiting",
				started, done, b.sendWait.size, b.readWait.size)
		}
		// The oldest chain completes.
		ch := inflight[0]
		inflight = inflight[1:]
		posted -= int(ch.c.slots)
		if ch.read {
			readsPosted -= int(ch.c.slots)
		}
		b.retire(ch.c)
		if ch.read {
			respond(ch.c.tag) // executed at once; its response follows
		} else {
			done++
			free = append(free, ch.c.tag)
		}
		for c, read, ok := b.next(); ok; c, read, ok = b.next() {
			post(c, read)
		}
	}
	if b.slots != posted || b.reads < 0 {
		t.Fatalf("budget says %d slots held, %d are posted", b.slots, posted)
	}
}
