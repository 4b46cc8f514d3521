package rdma

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
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

// The initiator depth accepted is the lower of the host's responder
// resources and the device's limit; a host that answers no RDMA READ is
// refused with Invalid IRD, a device that issues none with No Resources,
// each counted under its reason.
func TestReadDepth(t *testing.T) {
	for _, c := range []struct {
		host, device, want int
		reject             uint16
		reason             string
	}{
		{host: 16, device: 4, want: 4},
		{host: 1, device: 16, want: 1},
		{host: 0, device: 16, reject: nvme.CMRejectInvalidIRD, reason: "invalid_ird"},
		{host: 16, device: 0, reject: nvme.CMRejectNoResources, reason: "no_resources"},
	} {
		got, err := readDepth(c.host, c.device)
		if c.reject == 0 {
			if err != nil || got != c.want {
				t.Errorf("host %d, device %d: depth %d, %v; want %d", c.host, c.device, got, err, c.want)
			}
			continue
		}
		if err == nil || err.Reject != c.reject || rejectReason(err.Reject) != c.reason {
			t.Errorf("host %d, device %d: depth %d, %v; want refusal %s", c.host, c.device, got, err, c.reason)
		}
	}
}

// A budget made for no RDMA READ still lets one through: the send budget
// alone never stalls a write. The device does, on a queue pair accepted
// with an initiator depth of 0, which is why readDepth refuses it.
func TestSendBudgetWithNoReadCredit(t *testing.T) {
	b := newSendBudget(64, 0, 8)
	if c := b.readCharge(1, 1); !b.fits(c) {
		t.Fatal("a budget made with maxReads 0 holds back every RDMA READ")
	}
}
