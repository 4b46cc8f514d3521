package fabrics

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// FuzzAuthSequence plays a peer that knows the host NQN, host ID and
// controller ID of an authenticated host, but not its secret. Each pair
// of input bytes is one step: on its own controller's admin queue, or on
// I/O queues it connects to the host's controller, it sends Negotiate,
// Reply, Success2, Failure2 or garbage, asks for a message, or lets time
// pass; the second byte picks the transaction ID, the DH group and the
// time. Whatever the order, the peer never authenticates, never costs the
// controller more DH key pairs than authMaxAttempts per queue, never ends
// or stalls the host's controller, and holds nothing once authTotalMax has
// passed.
func FuzzAuthSequence(f *testing.F) {
	f.Add([]byte{0, 1, 1, 1, 3, 1, 1, 1, 4, 1})                                                                                               // negotiate, challenge, reply, success1, success2
	f.Add([]byte{0, 1, 1, 1, 0, 2, 1, 2, 0, 3, 1, 3, 0, 4, 1, 4, 0, 5, 1, 5, 0, 7, 1, 7, 0, 8, 1, 8, 0, 9, 1, 9, 0, 10, 1, 10, 0, 11, 1, 11}) // a negotiate loop with DH
	f.Add([]byte{8, 0, 9, 0, 17, 0})                                                                                                          // out-of-turn receive on I/O queues
	f.Add([]byte{8, 2, 9, 2, 10, 3, 11, 0, 7, 255, 7, 255})                                                                                   // I/O queue transactions, then time
	f.Add([]byte{2, 0, 5, 0, 6, 9, 0, 1, 7, 30})                                                                                              // failure2, success2, garbage
	key := newTestSecret(f, 1, 32)
	f.Fuzz(func(t *testing.T, steps []byte) {
		if len(steps) > 128 {
			return
		}
		var dh countingReader
		useDHRand(t, &dh)
		at := newAuthTarget(t, key, nil, AuthPolicy{})
		victim, _ := at.authenticatedHost(t, key, nil)
		dhBefore := dh.n.Load()

		peer := at.connectAuth(t, 0)
		queues := append([]*LoopQueue{peer.admin}, peer.intoController(at, victim.cntl)...)
		var elapsed time.Duration
		for i := 0; i+1 < len(steps); i += 2 {
			op, arg := steps[i], steps[i+1]
			q := queues[int(op>>3)%len(queues)]
			var msg []byte
			switch op & 7 {
			case 0:
				msg = nvme.AuthNegotiateMsg{TID: uint16(arg), NAPD: 1, AuthID: 1, Hashes: []uint8{1, 2, 3},
					DHGroups: []uint8{arg % 6}}.Encode()
			case 1:
				sendAuth(q, false, make([]byte, 4096))
			case 2:
				msg = make([]byte, nvme.AuthFailureSize)
				nvme.AuthFailureMsg{ID: nvme.AuthFailure2, TID: uint16(arg), Reason: 1, Explanation: 1}.EncodeTo(msg)
			case 3:
				msg = nvme.AuthReplyMsg{TID: uint16(arg), R: make([]byte, 32), DHV: make([]byte, 256*int(arg%2))}.Encode()
			case 4:
				msg = nvme.EncodeAuthSuccess2(uint16(arg))
			case 5:
				msg = nvme.AuthReplyMsg{TID: uint16(arg), R: make([]byte, 32), CValid: true, C: make([]byte, 32), Seq: 1}.Encode()
			case 6:
				msg = []byte{0, 0xf0, arg, 0, byte(arg), 0, 1, 1}
			case 7:
				d := time.Duration(arg) * time.Second / 4
				at.clock.Advance(d)
				elapsed += d
			}
			if msg != nil {
				sendAuth(q, true, msg)
			}
			if peer.ctrl().authenticated.Load() {
				t.Fatal("the peer authenticated without the secret")
			}
			if n := dh.n.Load() - dhBefore; int(n) > authMaxAttempts*len(queues) {
				t.Fatalf("%d DH key pairs for %d queues", n, len(queues))
			}
		}
		expectVictimUntouched(t, at, victim)
		// Nothing of the peer's outlasts authTotalMax.
		at.clock.Advance(authTotalMax + authFailureGrace)
		for _, q := range queues {
			if !q.Disconnected() {
				t.Fatalf("queue %d of the peer still connected %v after it connected", q.Queue.QID, elapsed+authTotalMax)
			}
		}
		if n := len(at.s.Controllers()); n != 1 {
			t.Fatalf("%d controllers; want the host's alone", n)
		}
	})
}

// intoController connects I/O queues 2 and 3 to controller cntl, which
// another host authenticated, as h, which cannot; each connect asks for
// authentication.
func (h *host) intoController(at *authTarget, cntl uint16) []*LoopQueue {
	t := h.t
	var queues []*LoopQueue
	for qid := uint16(2); qid <= 3; qid++ {
		q := NewLoopQueue(at.tg, at.p, qid, 32)
		t.Cleanup(q.Close)
		rsp := h.submit(q, connectCmd(qid, 31, 0, true), connectData(testNQN, testHost, cntl))
		if rsp.Status() != 0 || rsp.Result()&nvme.ConnectAuthReqATR == 0 {
			t.Fatalf("I/O queue %d connect: %v %#x", qid, rsp.Status(), rsp.Result())
		}
		queues = append(queues, q)
	}
	return queues
}

// expectVictimUntouched checks that the host's controller is untouched:
// its admin and I/O queue work.
func expectVictimUntouched(t *testing.T, at *authTarget, victim *host) {
	if at.s.controller(victim.cntl) == nil || victim.admin.Disconnected() || victim.io.Disconnected() {
		t.Fatal("the host's controller or its queues went")
	}
	victim.checkIO()
	if _, st := victim.propertyStatus(false, false, nvme.RegCSTS, 0); st != 0 {
		t.Fatalf("the host's admin queue: %v", st)
	}
}

// sendAuth sends an Authentication Send (send) or Receive on q, ignoring
// a queue already gone.
func sendAuth(q *LoopQueue, send bool, b []byte) {
	c := keyed(newCmd(nvme.OpFabrics), len(b))
	c.SetAuth(send, uint32(len(b)))
	q.Submit(c, b)
}
