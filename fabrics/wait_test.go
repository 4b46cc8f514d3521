package fabrics

import (
	"testing"
	"time"
)

// waitZero returns once the count reads 0, however many reads that
// takes, and gives up after its timeout on a count that stays up.
func TestWaitZero(t *testing.T) {
	n := int64(3)
	reads := 0
	count := func() int64 {
		reads++
		if n > 0 {
			n--
			return n + 1
		}
		return 0
	}
	if !waitZero(count, time.Hour) {
		t.Fatal("waitZero gave up on a count that reached 0")
	}
	if reads != 4 {
		t.Fatalf("count read %d times, want 4 (3 non-zero, then 0)", reads)
	}
	if waitZero(func() int64 { return 1 }, 5*time.Millisecond) {
		t.Fatal("waitZero reported 0 for a count that never got there")
	}
}

// Namespace.drain and the Preempt and Abort fence wait with waitZero:
// a namespace with a command held reports not drained after the timeout.
func TestDrainWaitsForHolds(t *testing.T) {
	tg, _, _ := testTarget(t)
	ns := tg.Subsystem(testNQN).Namespace(1)
	ns.holds.Add(1)
	if ns.drain(5 * time.Millisecond) {
		t.Fatal("drained with a command held")
	}
	ns.holds.Add(-1)
	if !ns.drain(time.Hour) {
		t.Fatal("not drained with nothing in flight")
	}
}

// A queue looks its transport's Resumer up once, when it is made; a
// transport without one has none.
func TestQueueResumerCached(t *testing.T) {
	tg, p, _ := testTarget(t)
	if q := NewQueue(tg, p, 1, 4, stubTransport{}); q.resumer != nil {
		t.Fatalf("resumer %T for a transport that cannot resume", q.resumer)
	}
	lq := &LoopQueue{}
	q := NewQueue(tg, p, 1, 4, lq)
	if q.resumer != Resumer(lq) {
		t.Fatalf("resumer %v, want the loop queue", q.resumer)
	}
}
