package fabrics

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// stubTransport is a transport that does nothing, admitting n requests.
type stubTransport struct{ n int }

func (stubTransport) Complete(*Request) {}
func (stubTransport) Wake()             {}
func (stubTransport) Disconnect()       {}
func (stubTransport) Peer() string      { return "stub" }
func (stubTransport) TRType() uint8     { return nvme.TransportRDMA }
func (s stubTransport) Requests() int   { return s.n }

// The completion handoff has a place for every request the transport
// admits, more than the queue's depth.
func TestHandoffFitsEveryRequest(t *testing.T) {
	tg, p, _ := testTarget(t)
	q := NewQueue(tg, p, 1, 128, stubTransport{n: 256})
	if cap(q.done) < 256 {
		t.Fatalf("handoff of %d for a transport of 256 requests", cap(q.done))
	}
}

// Close takes the requests other goroutines hand back while it waits for
// them: a completer finding the handoff full does not block for ever with
// its hold, and Close returns. Without that it deadlocks (go test -timeout).
func TestCloseTakesHandoffsWhileWaiting(t *testing.T) {
	tg, p, _ := testTarget(t)
	q := NewQueue(tg, p, 1, 4, stubTransport{})
	reqs := make([]Request, cap(q.done)+2)
	for range reqs {
		q.hold()
	}
	handed := make(chan struct{})
	go func() {
		for i := range reqs {
			q.completeAsync(&reqs[i])
		}
		close(handed)
	}()
	q.Close()
	<-handed
	if n := q.outstanding.Load(); n != 0 || len(q.done) != 0 {
		t.Fatalf("after Close: %d held, %d handed back and not taken", n, len(q.done))
	}
}
