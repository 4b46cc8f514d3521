package tcp

import (
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"
)

// procThreads is the process's OS thread count (/proc/self/status).
func procThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(b, []byte("\nThreads:"))
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	n, err := strconv.Atoi(string(bytes.TrimSpace(line)))
	if !ok || err != nil {
		t.Fatalf("no thread count in /proc/self/status: %v", err)
	}
	return n
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

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
	threads, fds := procThreads(t), openFDs(t)
	const n = 40
	hosts := make([]*testHost, n)
	for i := range hosts {
		hosts[i] = pair(t, l)
		hosts[i].icreq(false, false)
	}
	if got := procThreads(t); got < n {
		t.Fatalf("%d threads with %d connections open: the pollers should each hold one", got, n)
	}
	for _, h := range hosts {
		h.c.Close()
	}
	waitReleased(t, l)
	const slack = 4 // the runtime's own threads come and go
	waitFor(t, func() bool { return procThreads(t) <= threads+slack && openFDs(t) <= fds },
		func() string {
			return "after " + strconv.Itoa(n) + " connections closed: " + strconv.Itoa(procThreads(t)) + " threads (from " +
				strconv.Itoa(threads) + "), " + strconv.Itoa(openFDs(t)) + " descriptors (from " + strconv.Itoa(fds) + ")"
		})
}
