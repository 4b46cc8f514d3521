package tcp

import (
	"io"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func shortDataTimeout(t *testing.T) {
	old := DataTimeout()
	SetDataTimeout(200 * time.Millisecond)
	t.Cleanup(func() { SetDataTimeout(old) })
}

// waitDataTimeouts waits until the port counted n more data timeouts
// than before, doing step meanwhile.
func waitDataTimeouts(t *testing.T, l *Listener, before, n uint64, step func()) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.srv.stats.DataTimeouts.Load()-before < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d data timeouts counted, want %d", l.srv.stats.DataTimeouts.Load()-before, n)
		}
		step()
	}
}

// A host sent an R2T that never sends the data loses that connection
// after the data timeout, however busy its admin queue keeps the
// controller with keep alive; the admin queue goes on.
func TestR2TDataDeadline(t *testing.T) {
	shortDataTimeout(t)
	l := targetListener(t)
	admin := adminHost(t, l, false, false)
	h := ioQueue(t, l, admin, false, false)
	before := l.srv.stats.DataTimeouts.Load()
	startWrite(t, h, 64<<10)
	keepAlive := func() {
		if rsp := admin.exec(newCmd(nvme.AdminKeepAlive), nil, nil, nil); rsp.Status() != 0 {
			t.Fatalf("keep alive: %v", rsp.Status())
		}
	}
	waitDataTimeouts(t, l, before, 1, keepAlive)
	expectClosed(t, h)
	keepAlive()
	waitLent(t, l.srv.pool, 0)
}

// A host that sends reads and never reads its socket loses the
// connection after the data timeout, and its buffers come back.
func TestUnreadResponsesDeadline(t *testing.T) {
	shortDataTimeout(t)
	l := targetListener(t)
	h := ioHost(t, l, false, false)
	before := l.srv.stats.DataTimeouts.Load()
	for range 64 {
		rwCmd(h.cmd[:], nvme.IORead, 0, 64<<10, false)
		h.cid++
		nvme.Command(h.cmd[:]).SetCID(h.cid)
		h.sendCapsule(h.cmd[:], nil)
	}
	waitDataTimeouts(t, l, before, 1, func() { time.Sleep(time.Millisecond) })
	h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, h.c); err != nil {
		t.Fatalf("reading what was sent before the close: %v", err)
	}
	waitLent(t, l.srv.pool, 0)
}

// A watch whose count moves at each check reads no clock; its wait
// starts at the first check, or sleep, that finds the count where it was,
// so that a sleep right after the count moved lasts one timeout, not two.
func TestStallWatchReadsTheClockOnlyWhenStill(t *testing.T) {
	var w stallWatch
	const timeout = int64(time.Hour)
	for count := range uint64(3) {
		if w.stalled(true, count, timeout) || w.timed {
			t.Fatalf("count moved to %d: stalled, or the clock was read (timed %v)", count, w.timed)
		}
	}
	now := monotonic()
	if d, on := w.deadline(now, timeout); !on || d != now+timeout {
		t.Fatalf("deadline %d (on %v) after the count moved, want now + timeout, %d", d, on, now+timeout)
	}
	if w.stalled(true, 2, timeout) {
		t.Fatal("stalled before the timeout")
	}
	w.since -= timeout // the timeout passed without the count moving
	if !w.stalled(true, 2, timeout) {
		t.Fatal("not stalled after the timeout without the count moving")
	}
	if w.stalled(false, 2, timeout) || w.on {
		t.Fatal("a watch no longer active still on")
	}
}
