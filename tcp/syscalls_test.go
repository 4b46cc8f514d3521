package tcp

import (
	"testing"
)

// One command at a time costs the poller one writev and at most two
// reads: the one that empties the socket ends its pass, the pass after it
// and the first after a poll(2) that found the socket empty read nothing,
// so only the pass that sends the completion reads again (and finds
// nothing). It sleeps twice per command: for the command, and for the file
// backend's worker to finish it.
func TestSyscallsPerCommand(t *testing.T) {
	l := targetListener(t)
	h := ioHost(t, l, false, false)
	l.mu.Lock()
	conns := make([]*Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()

	const n = 200
	buf := make([]byte, 4096)
	for i := range n {
		if st := h.read(uint64(i%8)*8, buf); st != 0 {
			t.Fatalf("read %d: %v", i, st)
		}
	}
	// The counts belong to the pollers: read them once they are gone.
	for _, c := range conns {
		c.Disconnect()
		<-c.Done()
	}
	var io *Conn
	for _, c := range conns {
		if c.fq != nil && c.fq.QID != 0 {
			io = c
		}
	}
	if io == nil {
		t.Fatal("no I/O queue connection")
	}
	// Besides the commands: ICReq and Connect (its capsule and data sent
	// apart), and the close.
	const setup = 8
	t.Logf("%d commands: %d reads, %d writevs, %d polls", n, io.reads, io.writevs, io.polls)
	if io.reads > 2*n+setup {
		t.Errorf("%d reads for %d commands: want at most two per command (+%d to set up)", io.reads, n, setup)
	}
	if io.writevs > n+setup {
		t.Errorf("%d writevs for %d commands: want at most one per command (+%d to set up)", io.writevs, n, setup)
	}
	if io.polls > 2*n+setup {
		t.Errorf("%d polls for %d commands: want at most two per command (+%d to set up)", io.polls, n, setup)
	}
}
