package tcp

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// The pool's rules, step by step: the reserve serves small transfers
// only, and a connection over its share borrows nothing while another
// waits within its own.
func TestPoolSharesAndReserve(t *testing.T) {
	p := NewPool(8 << 20) // reserve 512 KiB
	var a, b account
	p.join()
	p.join()
	var lent []*[]byte
	for {
		buf := p.get(MaxBuffer, &a, false)
		if buf == nil {
			break
		}
		lent = append(lent, buf)
	}
	if got, want := a.held, (8<<20-reserve(p.Limit()))/MaxBuffer*MaxBuffer; got != want {
		t.Fatalf("alone, a borrowed %d bytes; want all the 1 MiB buffers but the reserve, %d", got, want)
	}
	small := p.get(4096, &b, true)
	if small == nil {
		t.Fatal("a 4 KiB transfer found no buffer in the reserve")
	}
	if p.get(MaxBuffer, &b, false) != nil {
		t.Fatal("a large transfer took the reserve")
	}
	p.waitingFor(&b, MaxBuffer)
	p.put(lent[0], &a)
	if p.get(MaxBuffer, &a, false) != nil {
		t.Fatalf("a, holding %d bytes over its share of %d, took a buffer back while b waits within its share", a.held, p.share(p.Limit()))
	}
	big := p.get(MaxBuffer, &b, false)
	if big == nil {
		t.Fatal("b, waiting within its share, got nothing when a buffer came back")
	}
	p.waitingFor(&b, 0)
	p.put(big, &b)
	if p.get(MaxBuffer, &a, false) == nil {
		t.Fatal("with nobody waiting, a could not borrow again")
	}
}

// The pool is shared among the I/O queues' connections: the admin queues,
// which take small buffers, count in no share, and a connection that
// closes gives its share back.
func TestSharesCountIOQueuesOnly(t *testing.T) {
	l := targetListener(t)
	pool := NewPool(64 << 20) // reserve 4 MiB
	l.srv.pool = pool
	a := ioHost(t, l, false, false)
	ioHost(t, l, false, false)
	if got, want := pool.share(pool.Limit()), int64(30<<20); got != want {
		t.Fatalf("two hosts, each with an admin and an I/O queue: share %d, want (64 MiB - 4 MiB) / 2 = %d", got, want)
	}
	a.c.Close()
	waitFor(t, func() bool { return pool.conns.Load() == 1 }, func() string {
		return fmt.Sprintf("%d connections counted in the shares after one I/O queue closed, want 1", pool.conns.Load())
	})
}

// sendWrites sends n writes of size bytes on R2T without waiting.
func sendWrites(h *testHost, n, size int) {
	for range n {
		rwCmd(h.cmd[:], nvme.IOWrite, 0, size, false)
		h.cid++
		nvme.Command(h.cmd[:]).SetCID(h.cid)
		h.sendCapsule(h.cmd[:], nil)
	}
}

// A host that asks for more large writes than the pool holds and sends
// none of their data holds no other host up: the other's Identify and
// 4 KiB read proceed, out of the reserve, and when the first host's
// write completes, the buffer it gave back goes to the other host's 1 MiB
// write waiting within its share, not to the first host's next command.
func TestStalledWritesHoldNoOtherHost(t *testing.T) {
	l := targetListener(t)
	l.srv.pool = NewPool(8 << 20)
	greedy := ioHost(t, l, false, false)
	sendWrites(greedy, 16, MaxBuffer)
	var r2ts []Header
	greedy.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for range 7 { // 8 MiB less the 512 KiB reserve
		r2t, err := greedy.readPDU(nil)
		if err != nil || r2t.Type() != TypeR2T {
			t.Fatalf("R2T: %v", err)
		}
		r2ts = append(r2ts, append(Header(nil), r2t...))
	}

	admin := pair(t, l)
	admin.icreq(false, false)
	admin.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	admin.connectAdmin(testNQN)
	if _, st := admin.identify(nvme.CNSController, 0); st != 0 {
		t.Fatalf("identify: %v", st)
	}
	other := pair(t, l)
	other.icreq(false, false)
	other.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if st := other.connectIO(testNQN, admin.cntl, true); st != 0 {
		t.Fatalf("I/O connect: %v", st)
	}
	if st := other.read(0, make([]byte, 4096)); st != 0 {
		t.Fatalf("4 KiB read: %v", st)
	}

	// The other host's 1 MiB write waits for a buffer.
	sendWrites(other, 1, MaxBuffer)
	waitStarving(t, l.srv.pool)
	data := bytes.Repeat([]byte{0x77}, MaxBuffer)
	first := r2ts[0]
	for off := 0; off < MaxBuffer; off += MaxH2CData {
		greedy.sendH2C(first.CID(), first.TTag(), uint32(off), data[off:off+MaxH2CData], off+MaxH2CData == MaxBuffer)
	}
	rsp, err := greedy.readPDU(nil)
	if err != nil || rsp.Type() != TypeCapsuleRsp || nvme.Completion(rsp.Response()).Status() != 0 {
		t.Fatalf("the first host's write: PDU %x, error %v", []byte(rsp), err)
	}
	r2t, err := other.readPDU(nil)
	if err != nil || r2t.Type() != TypeR2T || r2t.Length() != MaxBuffer {
		t.Fatalf("the other host's 1 MiB write got no R2T: %v", err)
	}
}

// waitStarving waits until a connection waits for a buffer within its
// share: the other host's capsule has reached its poller.
func waitStarving(t *testing.T, p *Pool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.starving.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no connection waits for a buffer within its share")
		}
		time.Sleep(time.Millisecond)
	}
}
