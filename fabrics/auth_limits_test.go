package fabrics

import (
	"crypto/rand"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A host that knows an allowed NQN but not its secret cannot keep a
// controller (an ID and a place in max_controllers) by asking for the
// longest KATO: each step lasts authStep whatever the KATO.
func TestAuthStepCappedWhateverKATO(t *testing.T) {
	at := newAuthTarget(t, newTestSecret(t, 1, 32), nil, AuthPolicy{})
	h := at.connectAuth(t, 0xFFFFFFFF) // 49.7 days
	neg := nvme.AuthNegotiateMsg{TID: 1, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{0}}
	if st := h.authSend(h.admin, neg.Encode()); st != 0 {
		t.Fatal(st)
	}
	if _, st := h.authRecv(h.admin, 4096); st != 0 {
		t.Fatal(st)
	}
	at.clock.Advance(authStep)
	// Late: the next message fails, well before authTotalMax.
	if st := h.authSend(h.admin, nvme.AuthReplyMsg{TID: 1, R: make([]byte, 32)}.Encode()); st != 0 {
		t.Fatal(st)
	}
	if n := len(at.s.Controllers()); n != 0 {
		t.Fatalf("%d controllers after a step of %v with KATO 0xFFFFFFFF", n, authStep)
	}
	if at.failures()[AuthFailureKey{testHost, "timeout"}] != 1 {
		t.Fatalf("failures %v", at.failures())
	}
}

// Messages that keep restarting the transaction each restart the step
// timer, but not the bound on the whole authentication.
func TestAuthNegotiateLoopBounded(t *testing.T) {
	at := newAuthTarget(t, newTestSecret(t, 1, 32), nil, AuthPolicy{})
	h := at.connectAuth(t, 28000)
	gap := authStep - 2*time.Second // always in time for the step
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

// countingReader counts the DH private values drawn.
type countingReader struct{ n atomic.Int32 }

func (c *countingReader) Read(b []byte) (int, error) {
	c.n.Add(1)
	return rand.Read(b)
}

func useDHRand(t *testing.T, r io.Reader) {
	orig := dhRand
	dhRand = r
	t.Cleanup(func() { dhRand = orig })
}

// A host restarting the transaction makes the controller compute a DH
// key pair each time: after authMaxAttempts without success the queue
// fails authentication instead.
func TestAuthAttemptsBounded(t *testing.T) {
	var dh countingReader
	useDHRand(t, &dh)
	at := newAuthTarget(t, newTestSecret(t, 1, 32), nil, AuthPolicy{})
	h := at.connectAuth(t, 0)
	for tid := uint16(1); tid < 100 && !h.admin.Disconnected(); tid++ {
		neg := nvme.AuthNegotiateMsg{TID: tid, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{nvme.DHGroup2048}}
		if st := h.authSend(h.admin, neg.Encode()); st != 0 {
			break // the controller is gone
		}
		b, st := h.authRecv(h.admin, 4096)
		if st != 0 {
			break
		}
		if f, err := nvme.ParseAuthFailure(b); err == nil {
			if int(tid) != authMaxAttempts+1 || f.Explanation != nvme.AuthFailed {
				t.Fatalf("AUTH_Failure1 (explanation %#x) at transaction %d", f.Explanation, tid)
			}
			break
		}
		if int(tid) > authMaxAttempts {
			t.Fatalf("challenge %d: more transactions than authMaxAttempts", tid)
		}
	}
	if n := int(dh.n.Load()); n == 0 || n > authMaxAttempts {
		t.Fatalf("%d DH key pairs for one controller, want 1..%d", n, authMaxAttempts)
	}
	if at.failures()[AuthFailureKey{testHost, "too_many_attempts"}] != 1 || len(at.s.Controllers()) != 0 {
		t.Fatalf("failures %v, %d controllers", at.failures(), len(at.s.Controllers()))
	}
}

// blockingReader holds the first DH key generation until released.
type blockingReader struct {
	entered, release chan struct{}
	once             atomic.Bool
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if b.once.CompareAndSwap(false, true) {
		close(b.entered)
		<-b.release
	}
	return rand.Read(p)
}

// The DH arithmetic runs off the poller: while one queue's controller
// computes its DH value, the commands of the same poller still complete.
func TestAuthDHOffPoller(t *testing.T) {
	br := &blockingReader{entered: make(chan struct{}), release: make(chan struct{})}
	useDHRand(t, br)
	at := newAuthTarget(t, newTestSecret(t, 1, 32), nil, AuthPolicy{})
	h := at.connectAuth(t, 0)
	neg := nvme.AuthNegotiateMsg{TID: 1, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{nvme.DHGroup2048}}
	if st := h.authSend(h.admin, neg.Encode()); st != 0 {
		t.Fatal(st)
	}
	recv := keyed(newCmd(nvme.OpFabrics), 4096)
	recv.SetAuth(false, 4096)
	recv.SetCID(1000)
	chal := make([]byte, 4096)
	challenged := make(chan nvme.Completion, 1)
	go func() { challenged <- <-h.admin.SubmitAsync(recv, chal) }()
	<-br.entered
	// The DH key generation is under way and held: another command of
	// the same poller completes meanwhile.
	get := newCmd(0)
	get.SetProperty(false, false, nvme.RegCSTS, 0)
	get.SetCID(1001)
	other := make(chan nvme.Completion, 1)
	go func() { other <- <-h.admin.SubmitAsync(get, nil) }()
	select {
	case rsp := <-other:
		if rsp.Status() != nvme.StatusAuthRequired|nvme.DNR {
			t.Fatalf("property get during the DH work: %v", rsp.Status())
		}
	case <-time.After(10 * time.Second):
		close(br.release)
		t.Fatal("the poller is stalled by the DH key generation")
	}
	close(br.release)
	rsp := <-challenged
	if _, err := nvme.ParseAuthChallenge(chal); rsp.Status() != 0 || err != nil {
		t.Fatalf("challenge: %v, %v", rsp.Status(), err)
	}
}

// A peer that knows the host NQN, host ID and controller ID but not the
// secret connects an I/O queue of its own to the host's authenticated
// controller and fails authentication there: only its queue goes.
func TestAuthIOQueueAttack(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	h, _ := at.authenticatedHost(t, key, nil)

	attack := func(qid uint16, fail bool) *LoopQueue {
		q := NewLoopQueue(at.tg, at.p, qid, 32)
		t.Cleanup(q.Close)
		rsp := h.submit(q, connectCmd(qid, 31, 0, true), connectData(testNQN, testHost, h.cntl))
		if rsp.Status() != 0 || rsp.Result()&nvme.ConnectAuthReqATR == 0 {
			t.Fatalf("attacker's I/O queue connect: %v, result %#x", rsp.Status(), rsp.Result())
		}
		if fail {
			// One AUTH_Receive out of turn.
			b, st := h.authRecv(q, 4096)
			if f, err := nvme.ParseAuthFailure(b); st != 0 || err != nil || f.Explanation != nvme.AuthIncorrectMessage {
				t.Fatalf("out-of-turn receive: %v, %+v, %v", st, f, err)
			}
		}
		return q
	}
	q2 := attack(2, true)
	at.clock.Advance(authFailureGrace)
	if n := len(at.s.Controllers()); n != 1 || h.admin.Disconnected() || h.io.Disconnected() {
		t.Fatalf("%d controllers after a failure on another I/O queue; the host's controller must stay", n)
	}
	if !q2.Disconnected() {
		t.Fatal("the failed I/O queue is still connected")
	}
	h.checkIO()
	if _, st := h.propertyStatus(false, false, nvme.RegCSTS, 0); st != 0 {
		t.Fatalf("admin command after the attack: %v", st)
	}
	if at.failures()[AuthFailureKey{testHost, "out_of_sequence"}] != 1 {
		t.Fatalf("failures %v", at.failures())
	}
	// A queue that never authenticates does not keep its queue ID.
	q3 := attack(3, false)
	at.clock.Advance(authTotalMax)
	if !q3.Disconnected() || h.io.Disconnected() {
		t.Fatal("an I/O queue that never authenticated is still connected after authTotalMax, or the host's went")
	}
	h.checkIO()
}

// A peer claiming a host's NQN cannot open controllers without end while
// they wait to authenticate: the host's pending ones are bounded, and the
// bound frees as they authenticate.
func TestAuthPendingPerHostBounded(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	var pending []*host
	for range maxPendingAuthPerHost {
		pending = append(pending, at.connectAuth(t, 0))
	}
	q := NewLoopQueue(at.tg, at.p, 0, 32)
	t.Cleanup(q.Close)
	rsp := pending[0].submit(q, connectCmd(0, 31, 0, false), connectData(testNQN, testHost, 0xffff))
	if rsp.Status() != nvme.StatusConnectControllerBusy {
		t.Fatalf("connect beyond %d controllers waiting to authenticate: %v", maxPendingAuthPerHost, rsp.Status())
	}
	if n := at.s.Stats.Refused.Counts()[RefusedKey{"authentication_pending", at.p.ID}]; n != 1 {
		t.Fatalf("refusals %v", at.s.Stats.Refused.Counts())
	}
	in := initiator{hostNQN: testHost, subNQN: testNQN, key: key, tid: 1}
	if err := pending[0].authenticate(pending[0].admin, in); err != nil {
		t.Fatal(err)
	}
	at.connectAuth(t, 0) // the authenticated one no longer counts
}
