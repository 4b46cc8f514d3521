package rdma

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/test/rdmahost"
)

// procThreads is the process's thread count, from /proc/self/status.
func procThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Threads:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				t.Fatalf("/proc/self/status: %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatal("/proc/self/status has no Threads: line")
	return 0
}

// procFDs is the process's open file descriptors.
func procFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

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
	threads, fds := procThreads(t), procFDs(t)

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
	waitFor(t, 10*time.Second, func() bool { return procThreads(t) >= n }, func() string {
		return fmt.Sprintf("%d threads with %d queue pairs: the pollers are not on threads of their own", procThreads(t), n)
	})
	t.Logf("threads: %d before, %d with %d queue pairs", threads, procThreads(t), n)
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
	waitFor(t, 10*time.Second, func() bool { return procThreads(t) <= threads+slack }, func() string {
		return fmt.Sprintf("%d threads once the %d queue pairs are gone, %d before them: the pollers' threads stayed", procThreads(t), n, threads)
	})
	waitFor(t, 10*time.Second, func() bool { return procFDs(t) <= fds }, func() string {
		return fmt.Sprintf("%d file descriptors once the %d queue pairs are gone, %d before them", procFDs(t), n, fds)
	})
}
