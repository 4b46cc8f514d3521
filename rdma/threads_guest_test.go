package rdma

import (
	"fmt"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/test/rdmahost"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/targettest"
)

// Every queue pair's poller runs on a thread of its own while it lives.
// Once the queue pairs are gone their threads must be too, and every file
// descriptor they opened: a host that connects and disconnects queue pairs
// would otherwise leave the daemon with as many threads as it ever had
// queue pairs at once.
func TestGuestQueuePairsGiveTheirThreadsBack(t *testing.T) {
	g := startGuestTarget(t)
	// One queue pair first, so that what the first use of the device and
	// of the connection manager opens once is in the baseline.
	c := g.dial(t, 0, 32)
	g.waitQueuePairs(t, 1, 5*time.Second)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	g.waitQueuePairs(t, 0, 10*time.Second)
	threads, fds := targettest.Threads(t), targettest.FDs(t)

	// Queue pairs that connect and never send Connect: each has a poller
	// asleep on its completion channel, a thread each.
	const n = 32
	conns := make([]*rdmahost.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Abandon()
		}
	}()
	for range n {
		conns = append(conns, g.dial(t, 0, 32))
	}
	g.waitQueuePairs(t, n, 10*time.Second)
	// Threads an earlier test's queue pairs left idle may serve these
	// pollers: the count need only reach one thread each.
	waitFor(t, 10*time.Second, func() bool { return targettest.Threads(t) >= n }, func() string {
		return fmt.Sprintf("%d threads with %d queue pairs: the pollers are not on threads of their own", targettest.Threads(t), n)
	})
	t.Logf("threads: %d before, %d with %d queue pairs", threads, targettest.Threads(t), n)
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	conns = nil
	g.waitQueuePairs(t, 0, 10*time.Second)

	// A few threads the runtime started for other goroutines while the
	// pollers slept may stay idle; the pollers' own must go.
	const slack = 4
	waitFor(t, 10*time.Second, func() bool { return targettest.Threads(t) <= threads+slack }, func() string {
		return fmt.Sprintf("%d threads once the %d queue pairs are gone, %d before them: the pollers' threads stayed", targettest.Threads(t), n, threads)
	})
	waitFor(t, 10*time.Second, func() bool { return targettest.FDs(t) <= fds }, func() string {
		return fmt.Sprintf("%d file descriptors once the %d queue pairs are gone, %d before them", targettest.FDs(t), n, fds)
	})
}
