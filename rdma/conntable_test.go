package rdma

import (
	"sync"
	"testing"
)

// The event channel goes only after the last connection's CM id: closing
// with connections live does not drain the table, the last one gone does,
// and only once.
func TestConnTableChannelOutlivesConnections(t *testing.T) {
	tb := newConnTable[int, string]()
	if !tb.add(1, "a") || !tb.add(2, "b") {
		t.Fatal("add refused before close")
	}
	conns, ok := tb.close()
	if !ok || len(conns) != 2 {
		t.Fatalf("close returned %v %v, want both connections to disconnect", conns, ok)
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
	if tb.gone() {
		t.Fatal("first of two gone reported as the last")
	}
	tb.forget(2)
	if !tb.gone() {
		t.Fatal("last connection gone not reported")
	}
	if !tb.drained() {
		t.Fatal("not drained with no connection live")
	}
}

// A connection set up while the listener closes is refused or handed to
// close for disconnecting: never both missed and accepted.
func TestConnTableNoConnectionMissedByClose(t *testing.T) {
	for range 200 {
		tb := newConnTable[int, int]()
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
