package rdma

import (
	"slices"
	"testing"
	"time"
)

// A simulation of one device's buffer pool under mixed load, on a
// simulated clock: a streaming queue pair keeps simStreamDepth 1 MiB
// transfers in flight, each holding its block for simLargeService, and
// simSmallQueues queue pairs each keep one 4 KiB transfer in flight (a
// latency-sensitive host at queue depth 1) for simSmallService. The pool
// holds four 1 MiB blocks, so the streamer alone keeps it dry.
const (
	simPool         = 4 * maxBlock
	simStreamDepth  = 8
	simSmallQueues  = 4
	simLargeService = time.Millisecond
	simSmallService = 50 * time.Microsecond
	simLength       = time.Second
)

var simSizes = queueSizes{depth: 8, nreq: 16, sendWR: 64, recvWR: 8, cqe: 72, maxRead: 1}

type simResult struct {
	smallWaits   []time.Duration // every 4 KiB transfer's wait for its block
	largeDone    int             // 1 MiB transfers completed
	largeMaxWait time.Duration
}

// p99 is the 99th percentile of the 4 KiB waits.
func (s simResult) p99() time.Duration {
	w := slices.Clone(s.smallWaits)
	slices.Sort(w)
	return w[len(w)*99/100]
}

type simTransfer struct {
	qp *QueuePair
	r  *request
	at time.Duration // when it ends (in flight) or began waiting
}

// simPolicy is how the pool serves its waiters.
type simPolicy struct {
	name      string
	maxBypass time.Duration // 0: strictly first come, first served
	split     bool          // a region kept for small transfers
}

var (
	simBefore = simPolicy{"one-line", 0, false} // as the pool was: one line, one region
	simNow    = simPolicy{"by-size", defaultMaxBypass, true}
)

// simulatePool runs the load under policy, 1 MiB transfers taking
// largeService each.
func simulatePool(t testing.TB, policy simPolicy, largeService time.Duration) simResult {
	var now time.Duration
	pool := newDataPool(&memoryRegion{buf: make([]byte, simPool)})
	pool.now = func() time.Duration { return now }
	pool.maxBypass = policy.maxBypass
	if !policy.split {
		pool.b, pool.small = newBuddy(simPool>>unitShift), nil
	}
	streamer, smalls := simQueues(t, pool)
	var res simResult
	var inFlight []simTransfer
	waitingSince := map[*request]time.Duration{}
	service := func(r *request) time.Duration {
		if r.order == maxOrder {
			return largeService
		}
		return simSmallService
	}
	started := func(qp *QueuePair, r *request, wait time.Duration) {
		if r.order == maxOrder {
			res.largeMaxWait = max(res.largeMaxWait, wait)
		} else {
			res.smallWaits = append(res.smallWaits, wait)
		}
		inFlight = append(inFlight, simTransfer{qp, r, now + service(r)})
	}
	issue := func(qp *QueuePair, r *request) {
		if qp.takeBlock(r) {
			started(qp, r, 0)
			return
		}
		waitingSince[r] = now
	}
	runGrants := func() {
		for _, qp := range append([]*QueuePair{streamer}, smalls...) {
			for len(qp.granted) > 0 {
				g := <-qp.granted
				r := &qp.reqs[g.tag]
				r.data = g.unit
				qp.held++
				started(qp, r, now-waitingSince[r])
				delete(waitingSince, r)
			}
		}
	}
	for range simStreamDepth {
		r := streamer.takeForTest()
		r.order = maxOrder
		issue(streamer, r)
	}
	for _, qp := range smalls {
		r := qp.takeForTest()
		r.order = 0
		issue(qp, r)
	}
	for now < simLength {
		i := earliest(inFlight)
		x := inFlight[i]
		inFlight = slices.Delete(inFlight, i, i+1)
		now = x.at
		if x.r.order == maxOrder {
			res.largeDone++
		}
		x.qp.giveBlock(x.r.data, x.r.order)
		x.r.data = -1
		runGrants()
		issue(x.qp, x.r)
	}
	return res
}

// simQueues makes the streaming queue pair and the simSmallQueues small
// ones, all on pool.
func simQueues(t testing.TB, pool *dataPool) (streamer *QueuePair, smalls []*QueuePair) {
	newQP := func() *QueuePair {
		qp := stubQueuePair(t, simSizes)
		qp.pool, qp.cache = pool, pool.newCache()
		return qp
	}
	streamer = newQP()
	for range simSmallQueues {
		smalls = append(smalls, newQP())
	}
	return streamer, smalls
}

// earliest is the index of the transfer in flight that ends first.
func earliest(inFlight []simTransfer) int {
	i := 0
	for j := range inFlight {
		if inFlight[j].at < inFlight[i].at {
			i = j
		}
	}
	return i
}

// A 1 MiB streamer keeping the pool dry holds up 4 KiB requests only
// briefly, and still gets most of its rate and makes steady progress.
// Before, in one line across sizes and one region, each 4 KiB request
// waited behind every 1 MiB one queued before it. Now small transfers
// have a region of their own, a line per size, and go first while no
// large one has been first in its line for maxBypass.
func TestPoolSmallRequestsBesideAStreamer(t *testing.T) {
	for _, large := range []time.Duration{simLargeService, 20 * simLargeService} {
		t.Run(large.String(), func(t *testing.T) {
			before := simulatePool(t, simBefore, large)
			now := simulatePool(t, simNow, large)
			t.Logf("4 KiB wait p99: before %v, now %v; 1 MiB transfers %d and %d, longest wait %v and %v",
				before.p99(), now.p99(), before.largeDone, now.largeDone, before.largeMaxWait, now.largeMaxWait)
			if now.p99() > large/2 || now.p99()*4 > before.p99() {
				t.Errorf("4 KiB wait p99 %v (before: %v); want at most %v and a quarter of before",
					now.p99(), before.p99(), large/2)
			}
			bound := simStreamDepth*large + defaultMaxBypass // its whole queue, one at a time
			if now.largeDone < before.largeDone*2/3 || now.largeMaxWait > bound {
				t.Errorf("streamer: %d transfers (before: %d), longest wait %v; want at least 2/3 of them and a wait under %v",
					now.largeDone, before.largeDone, now.largeMaxWait, bound)
			}
		})
	}
}

// BenchmarkPoolSmallBesideStreamer reports the simulation's 4 KiB wait
// p99 and the streamer's throughput, before and now, with 1 MiB transfers
// of 1 ms and 20 ms.
func BenchmarkPoolSmallBesideStreamer(b *testing.B) {
	for _, large := range []time.Duration{simLargeService, 20 * simLargeService} {
		for _, policy := range []simPolicy{simBefore, simNow} {
			b.Run(large.String()+"/"+policy.name, func(b *testing.B) {
				var res simResult
				for b.Loop() {
					res = simulatePool(b, policy, large)
				}
				b.ReportMetric(float64(res.p99().Microseconds()), "p99-4k-wait-µs")
				b.ReportMetric(float64(res.largeDone)/simLength.Seconds(), "1m-per-s")
				b.ReportMetric(float64(res.largeMaxWait.Microseconds()), "max-1m-wait-µs")
			})
		}
	}
}
