package tcp

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
)

// An I/O queue idle for longer than fabrics.ParkAfter parks its poller in
// the runtime's network poller for its next sleep, and the command that
// ends the sleep is served as any other. The pauses below are what makes
// the queue idle: each is a lower bound on the poller's sleep, not a wait
// for something to happen.
func TestIdleConnectionParks(t *testing.T) {
	l := targetListener(t)
	h := ioHost(t, l, false, false)
	conns := l.connections()
	buf := make([]byte, 4096)
	for i := range 3 {
		if st := h.read(uint64(i)*8, buf); st != 0 {
			t.Fatalf("read %d: %v", i, st)
		}
		time.Sleep(2 * fabrics.ParkAfter)
	}
	for _, c := range conns {
		c.Disconnect()
		<-c.Done()
	}
	for _, c := range conns {
		if c.fq != nil && c.fq.QID != 0 {
			// The first pause makes a long sleep, after which the poller
			// parks: through the second pause and the third.
			if c.idle.Parks < 2 {
				t.Errorf("the I/O queue's poller parked %d times in two idle pauses after a long sleep, want 2", c.idle.Parks)
			}
			return
		}
	}
	t.Fatal("no I/O queue connection")
}
