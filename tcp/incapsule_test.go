package tcp

import (
	"bytes"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// In-capsule data is lent by the pool like R2T data, and comes back.
func TestInCapsuleDataFromThePool(t *testing.T) {
	l := targetListener(t)
	l.srv.pool = NewPool(8 << 20)
	h := ioHost(t, l, false, false)
	data := bytes.Repeat([]byte{0x3c}, 8192)
	if st := h.write(0, data, true); st != 0 {
		t.Fatalf("in-capsule write: %v", st)
	}
	if peak := l.srv.pool.Peak(); peak < int64(len(data)) {
		t.Fatalf("the pool lent at most %d bytes; the in-capsule write's %d were not counted", peak, len(data))
	}
	waitLent(t, l.srv.pool, 0)
}

// With the pool empty, a capsule's in-capsule data waits for a buffer
// and the command then completes; but on a connection with an R2T
// outstanding, whose data may be behind the capsule, it never waits.
func TestInCapsuleDataWaitsForTheOthers(t *testing.T) {
	l := targetListener(t)
	l.srv.pool = NewPool(MaxBuffer) // no reserve
	small := ioHost(t, l, false, false)
	small.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	big := ioHost(t, l, false, false)
	big.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r2t := startWrite(t, big, MaxBuffer)
	cid, ttag := r2t.CID(), r2t.TTag()

	// Another connection's in-capsule write waits for the buffer.
	data := bytes.Repeat([]byte{0xc3}, 4096)
	rwCmd(small.cmd[:], nvme.IOWrite, 0, len(data), true)
	small.cid++
	nvme.Command(small.cmd[:]).SetCID(small.cid)
	small.sendCapsule(small.cmd[:], data)
	waitStarving(t, l.srv.pool)

	// The big connection's own in-capsule write, sent ahead of its R2T's
	// data, does not wait.
	if st := big.write(100, data, true); st != 0 {
		t.Fatalf("in-capsule write with an R2T outstanding: %v", st)
	}
	payload := bytes.Repeat([]byte{0x11}, MaxBuffer)
	for off := 0; off < MaxBuffer; off += MaxH2CData {
		big.sendH2C(cid, ttag, uint32(off), payload[off:off+MaxH2CData], off+MaxH2CData == MaxBuffer)
	}
	big.expectResponse(cid, nil, 0)
	small.expectResponse(small.cid, nil, 0)
	got := make([]byte, len(data))
	if st := small.read(0, got); st != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read back the waiting write: status %v, equal %v", st, bytes.Equal(got, data))
	}
	waitLent(t, l.srv.pool, 0)
}

// A connection with an R2T outstanding borrows past the pool's limit for
// its in-capsule data only up to maxOver: the capsules past that wait for
// a buffer, here for those of its own commands that the QoS limit holds,
// and all complete once the clock lets them go.
func TestInCapsuleDataPastTheLimitIsCapped(t *testing.T) {
	tg, p, _ := testTarget(t)
	p.InlineDataSize = 64 << 10
	clk := &fabrics.ManualClock{}
	tg.SetClock(clk)
	if err := tg.Subsystem(testNQN).SetQoS(1, fabrics.QoSLimits{IOPS: 10}); err != nil {
		t.Fatal(err)
	}
	l := testListener(t, tg, p)
	l.srv.pool = NewPool(MaxBuffer) // no reserve
	h := ioHost(t, l, false, false)
	h.c.SetReadDeadline(time.Now().Add(10 * time.Second))

	// The R2T write takes the QoS bucket's one command and the whole pool.
	r2t := startWrite(t, h, MaxBuffer)
	cid, ttag := r2t.CID(), r2t.TTag()
	const capsules = maxOver/(64<<10) + 1
	data := bytes.Repeat([]byte{0x6b}, 64<<10)
	payload := bytes.Repeat([]byte{0x11}, MaxBuffer)
	sent := make(chan error, 1)
	go func() {
		// The receiver stops at the capsule past the cap: send from
		// here, so that a full socket does not stop the test.
		var cmd [nvme.CommandSize]byte
		for i := range capsules {
			rwCmd(cmd[:], nvme.IOWrite, 128, len(data), true)
			nvme.Command(cmd[:]).SetCID(uint16(100 + i))
			h.sendCapsule(cmd[:], data)
		}
		for off := 0; off < MaxBuffer; off += MaxH2CData {
			h.sendH2C(cid, ttag, uint32(off), payload[off:off+MaxH2CData], off+MaxH2CData == MaxBuffer)
		}
		sent <- h.err
	}()

	// Each step of the clock lets one waiting command go.
	done := map[uint16]bool{}
	for step := 1; step <= capsules; step++ {
		clk.Advance(100 * time.Millisecond)
		for len(done) < step || len(done) == step && done[cid] {
			rsp, err := h.readPDU(nil)
			if err != nil || rsp.Type() != TypeCapsuleRsp {
				t.Fatalf("step %d: PDU %x, error %v; want a response", step, []byte(rsp), err)
			}
			c := nvme.Completion(rsp.Response())
			if c.Status() != 0 || done[c.CID()] {
				t.Fatalf("response for command %d, status %v", c.CID(), c.Status())
			}
			done[c.CID()] = true
		}
	}
	if !done[cid] {
		h.expectResponse(cid, nil, 0)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if peak, most := l.srv.pool.Peak(), int64(MaxBuffer+maxOver); peak > most {
		t.Fatalf("the pool lent %d bytes at once, past the limit's %d and the connection's %d over it", peak, MaxBuffer, maxOver)
	}
	waitLent(t, l.srv.pool, 0)
}
