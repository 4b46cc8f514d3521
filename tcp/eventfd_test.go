package tcp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A Wake or Disconnect that passed its checks just before the connection
// tore down writes nothing: the eventfd's number may already belong to
// another descriptor, another host's socket perhaps.
func TestKickAfterTeardownWritesNothing(t *testing.T) {
	l := targetListener(t)
	h := pair(t, l)
	h.icreq(false, false)
	var c *Conn
	l.mu.Lock()
	for conn := range l.conns {
		c = conn
	}
	l.mu.Unlock()
	h.c.Close()
	<-c.Done()

	// Take descriptors until one has the eventfd's old number.
	var taken []int
	t.Cleanup(func() {
		for _, fd := range taken {
			unix.Close(fd)
		}
	})
	reused := -1
	for reused < 0 && len(taken) < 64 {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		taken = append(taken, fd)
		if fd == c.efd {
			reused = fd
		}
	}
	if reused < 0 {
		t.Fatalf("descriptor %d was not reused", c.efd)
	}
	c.kick()
	var b [8]byte
	if n, err := unix.Read(reused, b[:]); err != unix.EAGAIN {
		t.Fatalf("the descriptor's new owner received %d bytes (%v) from the torn down connection", n, err)
	}
}
