package rdma

import "testing"

// The copies of in-capsule data for commands waiting on QoS are the
// commands' own length, not the port's whole in-capsule size, are reused
// while they fit, and go once the poller sleeps with none lent.
func TestWaitBufsFitTheCommandAndGo(t *testing.T) {
	qp := stubQueuePair(t, queueSizes{depth: 2, nreq: 4, inline: 8192, sendWR: 64, recvWR: 2, cqe: 66, maxRead: 1})
	a := qp.waitBuf(512)
	if len(a) != 512 || cap(a) != 512 {
		t.Fatalf("a 512-byte command's copy is %d bytes (capacity %d), want 512", len(a), cap(a))
	}
	qp.giveWaitBuf(a)
	b := qp.waitBuf(256)
	if len(b) != 256 || &b[0] != &a[0] {
		t.Fatalf("a 256-byte command got %d bytes, reused %v; want the 512-byte copy again", len(b), &b[0] == &a[0])
	}
	c := qp.waitBuf(4096)
	if len(c) != 4096 {
		t.Fatalf("a 4 KiB command's copy is %d bytes", len(c))
	}
	qp.giveWaitBuf(c)
	qp.dropWaitBufs()
	if len(qp.waitBufs) != 1 {
		t.Fatalf("%d copies kept with one still lent, want the free one kept", len(qp.waitBufs))
	}
	qp.giveWaitBuf(b)
	qp.dropWaitBufs()
	if len(qp.waitBufs) != 0 || qp.waitLent != 0 {
		t.Fatalf("%d copies kept, %d lent, once none is lent; want none", len(qp.waitBufs), qp.waitLent)
	}
}
