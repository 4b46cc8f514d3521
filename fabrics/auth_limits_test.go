package fabrics

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A host that knows an allowed NQN but not its secret cannot keep a
// controller (an ID and a place in max_controllers) by asking for the
// longest KATO: each step is capped at authStepMax.
func TestAuthStepCappedWhateverKATO(t *testing.T) {
	at := newAuthTarget(t, newTestSecret(t, 1, 32), nil, AuthPolicy{})
	at.connectAuth(t, 0xFFFFFFFF) // 49.7 days
	at.clock.Advance(2 * authStepMax)
	if n := len(at.s.Controllers()); n != 0 {
		t.Fatalf("%d controllers two capped steps after a Connect with KATO 0xFFFFFFFF and no authentication", n)
	}
	if at.failures()[AuthFailureKey{testHost, "timeout"}] != 1 {
		t.Fatalf("failures %v", at.failures())
	}
}

// Messages that keep restarting the transaction each restart the step
// timer, but not the bound on the whole authentication.
func TestAuthNegotiateLoopBounded(t *testing.T) {
	at := newAuthTarget(t, newTestSecret(t, 1, 32), nil, AuthPolicy{})
	h := at.connectAuth(t, 20000)
	gap := authStepMin - time.Second // always in time for the step
	var elapsed time.Duration
	for tid := uint16(1); elapsed+gap < authTotalMax; tid++ {
		neg := nvme.AuthNegotiateMsg{TID: tid, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{0}}
		if st := h.authSend(h.admin, neg.Encode()); st != 0 {
			t.Fatalf("negotiate at %v: %v", elapsed, st)
		}
		at.clock.Advance(gap)
		elapsed += gap
		if len(at.s.Controllers()) != 1 {
			t.Fatalf("controller gone at %v, before the bound on the whole authentication", elapsed)
		}
	}
	at.clock.Advance(authTotalMax - elapsed)
	if n := len(at.s.Controllers()); n != 0 {
		t.Fatalf("%d controllers %v after Connect with a transaction restarted every %v", n, authTotalMax, gap)
	}
	if !h.admin.Disconnected() {
		t.Fatal("the admin queue is still connected")
	}
}
