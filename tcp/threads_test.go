package tcp

import (
	"strconv"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/test/targettest"
)

// waitFor polls cond until it holds, or fails after 10 s with what().
func waitFor(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		time.Sleep(time.Millisecond)
	}
}

// Connections give back their OS threads and descriptors when they
// close: each poller locks a thread, which must exit with it.
func TestConnectionsGiveThreadsBack(t *testing.T) {
	l := targetListener(t)
	threads, fds := targettest.Threads(t), targettest.FDs(t)
	const n = 40
	hosts := make([]*testHost, n)
	for i := range hosts {
		hosts[i] = pair(t, l)
		hosts[i].icreq(false, false)
	}
	if got := targettest.Threads(t); got < n {
		t.Fatalf("%d threads with %d connections open: the pollers should each hold one", got, n)
	}
	for _, h := range hosts {
		h.c.Close()
	}
	waitReleased(t, l)
	const slack = 4 // the runtime's own threads come and go
	waitFor(t, func() bool { return targettest.Threads(t) <= threads+slack && targettest.FDs(t) <= fds },
		func() string {
			return "after " + strconv.Itoa(n) + " connections closed: " + strconv.Itoa(targettest.Threads(t)) + " threads (from " +
				strconv.Itoa(threads) + "), " + strconv.Itoa(targettest.FDs(t)) + " descriptors (from " + strconv.Itoa(fds) + ")"
		})
}
