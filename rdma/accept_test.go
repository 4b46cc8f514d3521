package rdma

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

// fakeQueuePair plays a queue pair's end of set-up: Disconnect takes the
// lock, moves the queue pair to the error state and stops the poller; the
// poller, once started and stopped, tears the queue pair down.
type fakeQueuePair struct {
	mu       sync.Mutex // QueuePair.mu
	qpState  string     // written by rdma_accept and rdma_disconnect: run with -race
	stopOnce sync.Once
	stopped  chan struct{}
	running  chan struct{} // closed when the poller starts
	tornDown chan struct{}

	logMu sync.Mutex
	log   []string
}

func newFakeQueuePair() *fakeQueuePair {
	return &fakeQueuePair{stopped: make(chan struct{}), running: make(chan struct{}), tornDown: make(chan struct{})}
}

func (f *fakeQueuePair) record(s string) {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	f.log = append(f.log, s)
}

func (f *fakeQueuePair) disconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.qpState = "error"
	f.stopOnce.Do(func() { close(f.stopped) })
}

func (f *fakeQueuePair) start() {
	close(f.running)
	go func() {
		<-f.stopped
		f.record("teardown")
		close(f.tornDown)
	}()
}

// The port closes while rdma_accept runs: the poller must not tear the
// queue pair down (rdma_destroy_qp) until the accept returned, and then
// tears it down once; rdma_disconnect waits for the accept too (-race).
func TestAcceptBeforePollerTeardown(t *testing.T) {
	f := newFakeQueuePair()
	accept := func() error {
		go f.disconnect() // Close, from another goroutine
		select {
		case <-f.running:
			// A running poller, stopped by Close, tears down.
			<-f.tornDown
			t.Error("the poller tore the queue pair down while rdma_accept used it")
		default:
		}
		f.qpState = "ready to send"
		f.record("accept")
		return nil
	}
	if err := acceptThenStart(&f.mu, accept, f.disconnect, f.start); err != nil {
		t.Fatal(err)
	}
	<-f.tornDown
	f.logMu.Lock()
	defer f.logMu.Unlock()
	if want := []string{"accept", "teardown"}; !slices.Equal(f.log, want) {
		t.Fatalf("order %q, want %q", f.log, want)
	}
}

// A failed accept leaves the queue pair stopped, and its poller tears it
// down once, releasing what set-up took.
func TestFailedAcceptTornDownOnce(t *testing.T) {
	f := newFakeQueuePair()
	refused := errors.New("rdma_accept: connection reset")
	err := acceptThenStart(&f.mu, func() error { return refused }, f.disconnect, f.start)
	if !errors.Is(err, refused) {
		t.Fatalf("error %v, want the accept's", err)
	}
	<-f.tornDown
	f.logMu.Lock()
	defer f.logMu.Unlock()
	if want := []string{"teardown"}; !slices.Equal(f.log, want) {
		t.Fatalf("after a failed accept: %q, want %q", f.log, want)
	}
}
