package tcp

import (
	"bytes"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// In-capsule data is lent by the pool like R2T data, and comes back.
func TestInCapsuleDataFromThePool(t *testing.T) {
	tg, p, _ := testTarget(t)
	l := testListener(t, tg, p)
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
	tg, p, _ := testTarget(t)
	l := testListener(t, tg, p)
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
