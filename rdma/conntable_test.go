package rdma

import (
	"runtime"
	"sync"
	"testing"
)

// The event channel goes only after the last connection's CM id: closing
// with connections live does not drain the table, the last one gone does,
// and only once.
func TestConnTableChannelOutlivesConnections(t *testing.T) {
	wakes := 0
	tb := newConnTable[int, string](func() { wakes++ })
	if !tb.add(1, "a") || !tb.add(2, "b") {
		t.Fatal("add refused before close")
	}
	conns, ok := tb.close()
	if !ok || len(conns) != 2 {
		t.Fatalf("close returned %v %v, want both connections to disconnect", conns, ok)
	}
	if wakes != 1 {
		t.Fatalf("close woke the event loop %d times, want once", wakes)
	}
	if _, again := tb.close(); again {
		t.Fatal("second close reported closing anew")
	}
	if tb.drained() {
		t.Fatal("drained with two connections live: the channel would be freed under them")
	}
	tb.forget(1)
	if tb.drained() {
		t.Fatal("drained after forget: a forgotten connection's CM id still exists")
	}
	tb.gone()
	if wakes != 1 {
		t.Fatal("first of two gone woke the event loop as if it were the last")
	}
	tb.forget(2)
	tb.gone()
	if wakes != 2 {
		t.Fatal("last connection gone did not wake the event loop")
	}
	if !tb.drained() {
		t.Fatal("not drained with no connection live")
	}
}

// The event loop closes its eventfd once drained reports true; no wake
// may write to it after that, or the write lands in whatever file reused
// the descriptor. Here the event loop is woken by some other event just
// as the last connection goes. Run with -race: eventfdClosed is written
// by the loop and read by the wake, ordered only by the table's lock.
func TestConnTableNoWakeAfterDrained(t *testing.T) {
	for range 500 {
		eventfdClosed := false
		late := false
		tb := newConnTable[int, int](func() {
			if eventfdClosed {
				late = true
			}
		})
		tb.add(1, 1)
		tb.close()
		loopDone := make(chan struct{})
		go func() { // the event loop
			for !tb.drained() {
				runtime.Gosched()
			}
			eventfdClosed = true
			close(loopDone)
		}()
		tb.forget(1)
		tb.gone()
		<-loopDone
		if late {
			t.Fatal("the last queue pair's wake ran after the event loop closed the eventfd")
		}
	}
}

// A connection set up while the listener closes is refused or handed to
// close for disconnecting: never both missed and accepted.
func TestConnTableNoConnectionMissedByClose(t *testing.T) {
	for range 200 {
		tb := newConnTable[int, int](func() {})
		var added []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if tb.add(i, i) {
					mu.Lock()
					added = append(added, i)
					mu.Unlock()
				}
			}()
		}
		conns, _ := tb.close()
		wg.Wait()
		seen := map[int]bool{}
		for _, c := range conns {
			seen[c] = true
		}
		for _, a := range added {
			if !seen[a] {
				t.Fatalf("connection %d was accepted but close did not return it to disconnect", a)
			}
		}
		if tb.liveCount() != len(added) {
			t.Fatalf("%d live, %d added", tb.liveCount(), len(added))
		}
	}
}
