package fabrics

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// One peer address that opens queue pairs and never connects them holds
// at most limits.unconnected_per_address places: other addresses still
// get theirs, and a Connect frees the address's place for its next queue.
func TestUnconnectedPerAddress(t *testing.T) {
	tg, p, _ := testTarget(t)
	tg.SetMaxQueuePairs(10)
	tg.SetQueuePairCaps(2, 0)
	squatter, fresh := netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("10.0.0.8")
	var held []*LoopQueue
	for range 2 {
		q, err := DialLoopQueueFrom(tg, p, 0, 32, squatter)
		if err != nil {
			t.Fatalf("a place under the cap: %v", err)
		}
		defer q.Close()
		held = append(held, q)
	}
	if _, err := DialLoopQueueFrom(tg, p, 0, 32, squatter); !errors.Is(err, ErrNoResources) {
		t.Fatalf("third unconnected queue pair from one address: %v, want ErrNoResources", err)
	}
	if n := tg.Refused.Counts()[RefusedKey{"address_limit", p.ID}]; n != 1 {
		t.Fatalf("address_limit refusals %d, want 1", n)
	}
	q, err := DialLoopQueueFrom(tg, p, 0, 32, fresh)
	if err != nil {
		t.Fatalf("another address while the first is at its cap: %v", err)
	}
	defer q.Close()
	// An IPv4-mapped IPv6 address is the same peer.
	if _, err := DialLoopQueueFrom(tg, p, 0, 32, netip.AddrFrom16(squatter.As16())); !errors.Is(err, ErrNoResources) {
		t.Fatalf("the same address IPv4-mapped: %v, want ErrNoResources", err)
	}
	// Connected, a queue pair counts for its host, not its address.
	if rsp, _ := held[0].Submit(connectCmd(0, 31, 0, false), connectData(testNQN, testHost, nvme.ControllerIDDynamic)); rsp.Status() != 0 {
		t.Fatalf("connect: %v", rsp.Status())
	}
	if un, hosts := tg.HeldPlaces(); un[squatter] != 1 || hosts[testHost] != 1 {
		t.Fatalf("after one Connect: unconnected %v, by host %v; want 1 for the address and 1 for the host", un, hosts)
	}
	next, err := DialLoopQueueFrom(tg, p, 0, 32, squatter)
	if err != nil {
		t.Fatalf("a place after the address's Connect: %v", err)
	}
	next.Close()
	held[1].Close()
	held[0].Close()
	q.Close()
	if un, hosts := tg.HeldPlaces(); len(un) != 0 || len(hosts) != 0 {
		t.Fatalf("every queue pair closed: unconnected %v, by host %v still held", un, hosts)
	}
	if reserved, _ := tg.QueuePairs(); reserved != 0 {
		t.Fatalf("every queue pair closed: %d places reserved", reserved)
	}
}

// One host NQN holds at most limits.queue_pairs_per_host connected queue
// pairs: its next Connect is refused with Controller Busy, another host
// still connects, and a place the host gives back is its to take again.
func TestQueuePairsPerHost(t *testing.T) {
	tg, p, _ := testTarget(t)
	tg.SetQueuePairCaps(16, 2)
	addr := netip.MustParseAddr("10.0.0.7")
	dial := func() *LoopQueue {
		t.Helper()
		q, err := DialLoopQueueFrom(tg, p, 0, 32, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(q.Close)
		return q
	}
	connect := func(q *LoopQueue, host string) nvme.Status {
		rsp, err := q.Submit(connectCmd(0, 31, 0, false), connectData(testNQN, host, nvme.ControllerIDDynamic))
		if err != nil {
			t.Fatal(err)
		}
		return rsp.Status()
	}
	first, second, third := dial(), dial(), dial()
	for _, q := range []*LoopQueue{first, second} {
		if st := connect(q, testHost); st != 0 {
			t.Fatalf("connect under the cap: %v", st)
		}
	}
	if st := connect(third, testHost); st != nvme.StatusConnectControllerBusy|nvme.DNR {
		t.Fatalf("third queue pair of one host: %v, want Connect Controller Busy with DNR", st)
	}
	if n := tg.Refused.Counts()[RefusedKey{"host_limit", p.ID}]; n != 1 {
		t.Fatalf("host_limit refusals %d, want 1", n)
	}
	const other = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000ff"
	if st := connect(dial(), other); st != 0 {
		t.Fatalf("another host while the first is at its cap: %v", st)
	}
	first.Close()
	if st := connect(third, testHost); st != 0 {
		t.Fatalf("connect again after the host gave a queue pair back: %v", st)
	}
}

// A peer refused again and again is logged once per LogEvery, and
// the next line says how many were left out; the refusal counter counts
// every one.
func TestPlaceRefusalLogRateLimited(t *testing.T) {
	tg, p, _ := testTarget(t)
	logger, hook := logtest.NewNullLogger()
	tg.Log = logrus.NewEntry(logger)
	tg.SetMaxQueuePairs(2)
	tg.SetQueuePairCaps(1, 0)
	addr := netip.MustParseAddr("10.0.0.7")
	q, err := DialLoopQueueFrom(tg, p, 0, 32, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for range 50 {
		if _, err := DialLoopQueueFrom(tg, p, 0, 32, addr); !errors.Is(err, ErrNoResources) {
			t.Fatalf("over the address cap: %v", err)
		}
	}
	if n := tg.Refused.Counts()[RefusedKey{"address_limit", p.ID}]; n != 50 {
		t.Fatalf("address_limit refusals %d, want 50", n)
	}
	if warned := warnings(hook); warned != 1 {
		t.Fatalf("%d warnings for 50 refusals within %v, want 1", warned, LogEvery)
	}

	var l LogLimit
	t0 := time.Unix(1000, 0)
	if _, ok := l.Allow(t0); !ok {
		t.Fatal("first line held back")
	}
	for i := range 5 {
		if _, ok := l.Allow(t0.Add(time.Duration(i+1) * time.Second)); ok {
			t.Fatalf("line %d within the period let through", i+2)
		}
	}
	if n, ok := l.Allow(t0.Add(LogEvery)); !ok || n != 5 {
		t.Fatalf("first line after the period: allowed %v, suppressed %d; want allowed, 5", ok, n)
	}
}

// Five silent queue pairs past the connect deadline at once are five
// timeouts counted and one warning, not five.
func TestConnectTimeoutLogRateLimited(t *testing.T) {
	tg, p, _ := testTarget(t)
	logger, hook := logtest.NewNullLogger()
	tg.Log = logrus.NewEntry(logger)
	clk := &ManualClock{}
	tg.SetClock(clk)
	for range 5 {
		q, err := DialLoopQueue(tg, p, 0, 32)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
	}
	clk.Advance(ConnectTimeout)
	if n := tg.ConnectTimeouts()[p.ID]; n != 5 {
		t.Fatalf("%d connect timeouts, want 5", n)
	}
	if warned := warnings(hook); warned != 1 {
		t.Fatalf("%d warnings for 5 connect timeouts at once, want 1", warned)
	}
}

// warnings counts the warnings logged to hook.
func warnings(hook *logtest.Hook) int {
	n := 0
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			n++
		}
	}
	return n
}
