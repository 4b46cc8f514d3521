package fabrics

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A queue pair that never sends Connect is disconnected at ConnectTimeout
// and counted; its transport's teardown then gives its place of
// max_queue_pairs back. A failed Connect does not stop the deadline, a
// successful one does.
func TestConnectDeadline(t *testing.T) {
	tg, p, _ := testTarget(t)
	clk := &ManualClock{}
	tg.SetClock(clk)
	tg.SetMaxQueuePairs(2)
	silent, err := DialLoopQueue(tg, p, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	wrong, err := DialLoopQueue(tg, p, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	rsp, err := wrong.Submit(connectCmd(0, 31, 0, false), connectData("nqn.2026-11.io.example:none", testHost, nvme.ControllerIDDynamic))
	if err != nil || rsp.Status() == 0 {
		t.Fatalf("connect to an unknown subsystem: %v %v, want refused", rsp, err)
	}

	clk.Advance(ConnectTimeout - time.Millisecond)
	if silent.Disconnected() || wrong.Disconnected() {
		t.Fatal("disconnected before the connect deadline")
	}
	if n := tg.ConnectTimeouts()[p.ID]; n != 0 {
		t.Fatalf("%d connect timeouts before the deadline", n)
	}
	clk.Advance(time.Millisecond)
	if !silent.Disconnected() {
		t.Fatal("a queue pair without Connect is still up at the connect deadline")
	}
	if !wrong.Disconnected() {
		t.Fatal("a queue pair whose Connect failed is still up at the connect deadline")
	}
	if n := tg.ConnectTimeouts()[p.ID]; n != 2 {
		t.Fatalf("%d connect timeouts on port %d, want 2", n, p.ID)
	}

	// The transport tears the queue pairs down; a real host gets in.
	silent.Close()
	wrong.Close()
	q, err := DialLoopQueue(tg, p, 0, 32)
	if err != nil {
		t.Fatalf("queue pair after the silent ones went: %v", err)
	}
	defer q.Close()
	if rsp, err := q.Submit(connectCmd(0, 31, 0, false), connectData(testNQN, testHost, nvme.ControllerIDDynamic)); err != nil || rsp.Status() != 0 {
		t.Fatalf("connect: %v %v", rsp, err)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers pending after Connect with no keep alive, want the connect deadline stopped", clk.Pending())
	}
	clk.Advance(10 * ConnectTimeout)
	if q.Disconnected() {
		t.Fatal("a connected queue pair was disconnected by the connect deadline")
	}
	if n := tg.ConnectTimeouts()[p.ID]; n != 2 {
		t.Fatalf("%d connect timeouts, want still 2", n)
	}
}

// A queue pair closed before its deadline (the host went) is not counted,
// and leaves no timer behind.
func TestConnectDeadlineStoppedByClose(t *testing.T) {
	tg, p, _ := testTarget(t)
	clk := &ManualClock{}
	tg.SetClock(clk)
	q, err := DialLoopQueue(tg, p, 1, 32)
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	if clk.Pending() != 0 {
		t.Fatalf("%d timers pending after Close", clk.Pending())
	}
	clk.Advance(2 * ConnectTimeout)
	if n := tg.ConnectTimeouts()[p.ID]; n != 0 {
		t.Fatalf("%d connect timeouts for a closed queue pair", n)
	}
}

// The deadline fires on the clock's goroutine while Connect runs on the
// poller: whichever comes first decides, and a queue is disconnected
// exactly when it is counted (run with -race).
func TestConnectDeadlineRacesConnect(t *testing.T) {
	for range 50 {
		tg, p, _ := testTarget(t)
		clk := &ManualClock{}
		tg.SetClock(clk)
		q := NewLoopQueue(tg, p, 0, 32)
		fired := make(chan struct{})
		go func() {
			clk.Advance(ConnectTimeout)
			close(fired)
		}()
		q.Submit(connectCmd(0, 31, 0, false), connectData(testNQN, testHost, nvme.ControllerIDDynamic))
		<-fired
		if n := tg.ConnectTimeouts()[p.ID]; (n == 1) != q.Disconnected() || n > 1 {
			t.Fatalf("%d connect timeouts, disconnected %t", n, q.Disconnected())
		}
		q.Close()
	}
}
