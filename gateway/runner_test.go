package gateway

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// stuckStore grants every acquire and holds every renewal until unblock
// closes: the cluster stopped answering.
type stuckStore struct {
	renewing chan struct{} // a renewal started
	unblock  chan struct{}
}

func (s *stuckStore) Lock(renew bool) error {
	if renew {
		s.renewing <- struct{}{}
		<-s.unblock
	}
	return nil
}
func (s *stuckStore) Unlock() error             { return nil }
func (s *stuckStore) Recorded() (Holder, error) { return Holder{}, nil }
func (s *stuckStore) Record(Holder) error       { return nil }
func (s *stuckStore) Self() (string, error)     { return "10.0.0.1:0/1", nil }
func (s *stuckStore) Fence(string) error        { return nil }

// The owner steps down at its deadline while its renewal is stuck in the
// cluster: the step down waits for no call.
func TestRunnerStepsDownWhileRenewalHangs(t *testing.T) {
	var now atomic.Int64
	pub := make(chan State, 10)
	s := &stuckStore{renewing: make(chan struct{}, 1), unblock: make(chan struct{})}
	log := logrus.New()
	log.SetOutput(io.Discard)
	r := &Runner{Lease: &Lease{Group: 1, Timing: timing}, Store: s, Me: Holder{Name: "a", Cookie: "a-1"},
		Publish: func(_ uint32, st State) { pub <- st }, Log: logrus.NewEntry(log),
		Now: func() time.Duration { return time.Duration(now.Load()) }}
	ctx, cancel := context.WithCancel(context.Background())
	r.Start(ctx)
	for _, want := range []State{Standby, Owner} {
		if st := <-pub; st != want {
			t.Fatalf("published %v, want %v", st, want)
		}
	}
	now.Store(int64(timing.Renew))
	r.Poke()
	<-s.renewing
	now.Store(int64(timing.Deadline))
	r.Poke() // the deadline timer's wake, without waiting for it
	if st := <-pub; st != Standby {
		t.Fatalf("at the deadline with the renewal stuck: published %v", st)
	}
	if st := r.Status(); st.State != Standby || st.Takeovers != 1 {
		t.Fatalf("status %+v", st)
	}
	close(s.unblock)
	cancel()
	r.Wait()
	if r.Status().State != Standby {
		t.Fatal("a renewal that returned after the deadline made it the owner again")
	}
}
