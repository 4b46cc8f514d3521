package fabrics

import (
	"errors"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A subsystem at max_controllers refuses the next admin Connect with
// Controller Busy and DNR, and counts it.
func TestControllerLimit(t *testing.T) {
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	s.SetLimits(2, 4)
	connect(t, tg, p, testNQN)
	connect(t, tg, p, testNQN)
	q := NewLoopQueue(tg, p, 0, 32)
	defer q.Close()
	rsp, err := q.Submit(connectCmd(0, 31, 0, false), connectData(testNQN, testHost, 0xffff))
	if err != nil {
		t.Fatal(err)
	}
	if rsp.Status() != nvme.StatusConnectControllerBusy|nvme.DNR {
		t.Fatalf("third controller: %v, want Controller Busy with DNR", rsp.Status())
	}
	if n := s.Stats.Refused.Counts()[RefusedKey{"controller_limit", p.ID}]; n != 1 {
		t.Fatalf("controller_limit refusals %d, want 1", n)
	}
	// The discovery subsystem is not bound by it.
	connect(t, tg, p, nvme.DiscoveryNQN)
	connect(t, tg, p, nvme.DiscoveryNQN)
	connect(t, tg, p, nvme.DiscoveryNQN)
}

// Set Features Number of Queues grants at most max_io_queues, and a queue
// ID above the grant is refused pointing at QID.
func TestIOQueueLimit(t *testing.T) {
	tg, p, _ := testTarget(t)
	tg.Subsystem(testNQN).SetLimits(8, 4)
	h := connect(t, tg, p, testNQN)
	got, st := h.feature(true, nvme.FeatNumQueues, 63|63<<16)
	if st != 0 || got != 3|3<<16 {
		t.Fatalf("asked for 64 queues: granted %#x (%v), want 4 (0-based 3)", got, st)
	}
	q4 := NewLoopQueue(tg, p, 4, 128)
	defer q4.Close()
	if rsp, _ := q4.Submit(connectCmd(4, 127, 0, true), connectData(testNQN, testHost, h.cntl)); rsp.Status() != 0 {
		t.Fatalf("queue 4 of 4: %v", rsp.Status())
	}
	q5 := NewLoopQueue(tg, p, 5, 128)
	defer q5.Close()
	rsp, _ := q5.Submit(connectCmd(5, 127, 0, true), connectData(testNQN, testHost, h.cntl))
	if rsp.Status() != nvme.StatusConnectInvalidParam|nvme.DNR || rsp.Result() != nvme.ConnectSQEQID {
		t.Fatalf("queue 5 of 4: %v IATTR/IPO %#x, want invalid parameter at QID", rsp.Status(), rsp.Result())
	}
}

// The daemon-wide queue pair limit refuses a queue pair before anything is
// set up for it, counts the refusal, and frees the place when a queue pair
// goes; Number of Queues grants no more than the room left.
func TestQueuePairLimit(t *testing.T) {
	tg, p, _ := testTarget(t)
	tg.SetMaxQueuePairs(3)
	admin, err := DialLoopQueue(tg, p, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	h := &host{t: t, admin: admin}
	defer admin.Close()
	rsp := h.submit(admin, connectCmd(0, 31, 0, false), connectData(testNQN, testHost, 0xffff))
	if rsp.Status() != 0 {
		t.Fatalf("admin connect: %v", rsp.Status())
	}
	h.cntl = uint16(rsp.Result())
	h.setProperty(nvme.RegCC, ccEnableNVM)
	got, st := h.feature(true, nvme.FeatNumQueues, 7|7<<16)
	if st != 0 || got != 1|1<<16 {
		t.Fatalf("asked for 8 queues with room for 2: granted %#x (%v), want 2 (0-based 1)", got, st)
	}
	var ios []*LoopQueue
	for qid := uint16(1); qid <= 2; qid++ {
		q, err := DialLoopQueue(tg, p, qid, 128)
		if err != nil {
			t.Fatalf("queue %d: %v", qid, err)
		}
		ios = append(ios, q)
		if rsp, _ := q.Submit(connectCmd(qid, 127, 0, true), connectData(testNQN, testHost, h.cntl)); rsp.Status() != 0 {
			t.Fatalf("queue %d connect: %v", qid, rsp.Status())
		}
	}
	if _, err := DialLoopQueue(tg, p, 3, 128); !errors.Is(err, ErrNoResources) {
		t.Fatalf("fourth queue pair: %v, want ErrNoResources", err)
	}
	if n := tg.Refused.Counts()[RefusedKey{"queue_pair_limit", p.ID}]; n != 1 {
		t.Fatalf("queue_pair_limit refusals %d, want 1", n)
	}
	ios[1].Close()
	ios[1].Close() // closing twice gives the place back once
	if reserved, limit := tg.QueuePairs(); reserved != 2 || limit != 3 {
		t.Fatalf("queue pairs %d of %d after one closed, want 2 of 3", reserved, limit)
	}
	q, err := DialLoopQueue(tg, p, 2, 128)
	if err != nil {
		t.Fatalf("queue pair after one was freed: %v", err)
	}
	q.Close()
	ios[0].Close()
}

// adminConnect sends an admin Connect on a new queue and returns the
// queue and the completion; the queue is closed at the end of the test.
func adminConnect(t *testing.T, tg *Target, p *Port, subnqn string) (*LoopQueue, nvme.Completion) {
	t.Helper()
	q := NewLoopQueue(tg, p, 0, 32)
	t.Cleanup(q.Close)
	rsp, err := q.Submit(connectCmd(0, 31, 0, false), connectData(subnqn, testHost, nvme.ControllerIDDynamic))
	if err != nil {
		t.Fatal(err)
	}
	return q, rsp
}

// Controller IDs come from the subsystem's range, next-fit: after the last
// ID given, wrapping within the range, skipping IDs in use. A full range
// refuses Connect with Controller Busy and DNR, as the Linux target does;
// a new range applies to controllers created from then on.
func TestControllerIDRange(t *testing.T) {
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	if lo, hi := s.ControllerIDs(); lo != 1 || hi != 0xffef {
		t.Fatalf("default range %d..%d, want 1..65519", lo, hi)
	}
	if err := s.SetControllerIDs(10, 12); err != nil {
		t.Fatal(err)
	}
	queues := map[uint16]*LoopQueue{}
	next := func(want uint16) {
		t.Helper()
		q, rsp := adminConnect(t, tg, p, testNQN)
		if rsp.Status() != 0 || uint16(rsp.Result()) != want {
			t.Fatalf("connect: %v cntlid %d, want cntlid %d", rsp.Status(), uint16(rsp.Result()), want)
		}
		queues[want] = q
	}
	next(10)
	next(11)
	queues[10].Close()
	next(12) // next-fit: not the 10 just freed
	next(10) // wrapped
	_, rsp := adminConnect(t, tg, p, testNQN)
	if rsp.Status() != nvme.StatusConnectControllerBusy|nvme.DNR {
		t.Fatalf("connect with the range used up: %v, want Controller Busy with DNR", rsp.Status())
	}
	if n := s.Stats.Refused.Counts()[RefusedKey{"cntlid_range", p.ID}]; n != 1 {
		t.Fatalf("cntlid_range refusals %d, want 1", n)
	}
	queues[11].Close()
	next(11) // the only free one

	// A reload moves the range: new controllers get IDs from it, the
	// connected ones keep theirs and keep working.
	if err := s.SetControllerIDs(1000, 1001); err != nil {
		t.Fatal(err)
	}
	next(1000)
	next(1001)
	for _, id := range []uint16{10, 11, 12} {
		c := s.controller(id)
		if c == nil || queues[id].Disconnected() {
			t.Fatalf("controller %d, outside the new range, was dropped", id)
		}
	}
	// The discovery subsystem keeps the whole range.
	if _, rsp := adminConnect(t, tg, p, nvme.DiscoveryNQN); rsp.Status() != 0 {
		t.Fatalf("discovery connect: %v", rsp.Status())
	}
}

// The range may end at the last valid ID, FFEFh: the search wraps there
// rather than running into the reserved IDs.
func TestControllerIDRangeTop(t *testing.T) {
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	if err := s.SetControllerIDs(0xffee, nvme.MaxControllerID); err != nil {
		t.Fatal(err)
	}
	var ids []uint16
	for range 3 {
		q, rsp := adminConnect(t, tg, p, testNQN)
		if rsp.Status() != 0 {
			t.Fatalf("connect: %v", rsp.Status())
		}
		ids = append(ids, uint16(rsp.Result()))
		if len(ids) == 1 {
			q.Close()
		}
	}
	if ids[0] != 0xffee || ids[1] != 0xffef || ids[2] != 0xffee {
		t.Fatalf("controller IDs %#x, want [0xffee 0xffef 0xffee]", ids)
	}
}

func TestSetControllerIDsRefusesBadRanges(t *testing.T) {
	s := NewSubsystem(testNQN, "", "", true)
	for _, r := range [][2]uint16{{0, 5}, {5, 4}, {1, 0xfff0}} {
		if err := s.SetControllerIDs(r[0], r[1]); err == nil {
			t.Errorf("range %d..%d accepted", r[0], r[1])
		}
	}
	if lo, hi := s.ControllerIDs(); lo != 1 || hi != nvme.MaxControllerID {
		t.Fatalf("a refused range changed it to %d..%d", lo, hi)
	}
}
