package fabrics

import (
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// workersPerQueue is how many goroutines run blocking backend calls for one
// I/O queue. Backends see up to this many concurrent requests per queue.
const workersPerQueue = 8

// ThreadsPerQueuePair is the most OS threads one queue pair takes: its
// poller's, and one for each worker blocked in a backend call. The
// daemon sizes the Go runtime's thread limit by it.
const ThreadsPerQueuePair = 1 + workersPerQueue

// Queue is the fabrics side of one queue pair: admin (QID 0) or I/O. All
// methods but the ones documented otherwise run on the queue's poller.
type Queue struct {
	QID    uint16
	target *Target
	port   *Port
	tr     QueueTransport
	// resumer is tr as a Resumer, or nil: looked up once, not per
	// command a QoS limit meets.
	resumer Resumer
	depth   int
	log     *logrus.Entry

	ctrl      *Controller
	sqsize    uint16 // 1-based, from Connect
	sqhd      uint16
	sqFlowOff bool // the host disabled SQ flow control at Connect

	jobs        chan *Request // to the workers
	done        chan *Request // from workers and event sources
	outstanding atomic.Int32  // requests held outside the poller (hold, unhold)
	drained     chan struct{} // a token each time outstanding drops to 0
	workers     bool
	ring        *queueRing  // EngineIOURing: set up on the first file-backed I/O
	ringOff     bool        // the ring is not for this queue (threads, or set-up failed)
	async       *queueAsync // asynchronous backends (rbd): set up on their first I/O
	asyncOff    bool        // the set-up failed

	Stats     QueueStats
	nsStats   atomic.Pointer[[]nsStat] // per-namespace I/O counters
	scratch   []byte                   // admin: log pages are built here, then sliced by offset
	fuseFirst *Request                 // a fused first command waiting for its second
	auth      *queueAuth               // in-band authentication; nil when the host has no secret

	connectDeadline connectDeadline // until the first successful Connect (connectdeadline.go)
	place           *Place          // the transport's hold on a queue pair place (places.go)
}

// QueueStats are counters of one queue, written by its poller only. I/O
// counts live per namespace (IOStats), which the metrics and the SMART
// log read.
type QueueStats struct {
	ErrorsByType [nvme.StatusCodeTypes]atomic.Uint64 // by status code type
	BusyNanos    atomic.Uint64
}

// NewQueue creates the fabrics side of a queue pair the transport accepted
// on port with the host's queue ID and a depth of outstanding commands.
func NewQueue(t *Target, port *Port, qid uint16, depth int, tr QueueTransport) *Queue {
	q := &Queue{
		QID: qid, target: t, port: port, tr: tr, depth: depth,
		done: make(chan *Request, handoffSize(depth, tr)),

		drained: make(chan struct{}, 1),
	}
	q.resumer, _ = tr.(Resumer)
	q.log = t.Log.WithFields(logrus.Fields{"qid": qid, "peer": tr.Peer(), "port": port.ID})
	q.armConnectDeadline()
	return q
}

// handoffSize is the room of a queue's completion handoff: one place for
// every request the transport may have admitted, so that a worker or a
// backend's thread handing one back never waits for the poller.
func handoffSize(depth int, tr QueueTransport) int {
	n := depth + maxOutstandAER
	if rc, ok := tr.(RequestCounter); ok {
		n = max(n, rc.Requests())
	}
	return n
}

// Controller is the controller the queue is bound to, nil before Connect.
func (q *Queue) Controller() *Controller { return q.ctrl }

// Prepare decodes r.Cmd and validates everything but the data pointer. It
// returns false if r already completed (with an error status), or waits on
// its namespace's QoS limit (the transport's Resumer takes it up again);
// otherwise r.Dir and r.Len tell the transport what data to map before
// Execute.
func (q *Queue) Prepare(r *Request) bool {
	r.q, r.status, r.result = q, 0, 0
	r.Data, r.Dir, r.Len, r.ns, r.nsStats, r.handler, r.blocking = nil, DirNone, 0, nil, nil, nil, false
	r.pair, r.also, r.parked, r.fuseReady, r.fuseAbort = nil, nil, nil, false, false
	r.resvSeen = false
	r.started = nanotime()
	if q.ctrl != nil {
		q.ctrl.sawTraffic()
	}
	q.sqhd++
	if q.sqsize != 0 && q.sqhd >= q.sqsize {
		q.sqhd = 0
	}
	cmd := r.Cmd
	var st nvme.Status
	switch {
	case cmd.Flags()&nvme.FlagsPSDTMask != nvme.PSDTSGLContig:
		// Fabrics carries SGLs only.
		st = nvme.StatusInvalidField | nvme.DNR
	case q.auth != nil && !q.authorized() && !authExempt(cmd):
		st = nvme.StatusAuthRequired | nvme.DNR
	case cmd.Fuse() != 0 || q.fuseFirst != nil:
		st = q.prepareFused(r)
	case cmd.Opcode() == nvme.OpFabrics:
		st = q.prepareFabrics(r)
	case q.ctrl == nil:
		st = nvme.StatusCommandSequence | nvme.DNR
	case q.QID == 0:
		st = q.prepareAdmin(r)
	default:
		st = q.prepareIO(r)
	}
	if st != 0 {
		q.Fail(r, st)
		return false
	}
	if r.Len > MaxDataTransfer {
		q.Fail(r, nvme.StatusInvalidField|nvme.DNR)
		return false
	}
	if r.ns == nil {
		return true
	}
	// Before the transport takes a data buffer for it.
	held, st := q.throttle(r)
	if st != 0 {
		q.Fail(r, st)
		return false
	}
	return !held
}

// Fail completes r with status st, as when the transport cannot map its
// data.
func (q *Queue) Fail(r *Request, st nvme.Status) {
	r.status = st
	if q.fuseFirst == r {
		q.fuseFirst = nil // its second must not pair with a completed command
	}
	if first := r.pair; first != nil {
		// A second whose data the transport could not map: its first
		// fails too, now or once it executes.
		r.pair = nil
		q.abortFirst(first, nvme.StatusFusedFail)
	}
	q.complete(r)
}

// Execute runs a prepared command whose data (for DirHostToCtrl) is in
// r.Data. Blocking backend calls go to the queue's ring or an
// asynchronous backend where they can, otherwise to its workers.
func (q *Queue) Execute(r *Request) {
	if r.pair != nil && q.parkSecond(r) {
		return
	}
	// A fused first command only waits for its second: it stays here.
	if r.blocking && r.Cmd.Fuse() != nvme.FuseFirst {
		if q.submitRing(r) || q.submitAsync(r) {
			return
		}
		q.startWorkers()
		q.hold()
		q.jobs <- r
		return
	}
	done := r.handler(q, r)
	r.release()
	if done {
		also := r.also
		q.complete(r)
		if also != nil {
			q.complete(also)
		}
	}
	if second := r.parked; second != nil {
		r.parked = nil
		q.Execute(second) // its first has executed
	}
}

func (q *Queue) startWorkers() {
	if q.workers {
		return
	}
	q.workers = true
	q.jobs = make(chan *Request, q.depth)
	for range workersPerQueue {
		go q.work()
	}
}

func (q *Queue) work() {
	for r := range q.jobs {
		r.handler(q, r)
		r.release() // before the poller may see it: removal waits for this
		if also := r.also; also != nil {
			q.done <- also // covered by r's hold, which ends below
		}
		q.completeAsync(r)
	}
}

// completeAsync hands r back to the poller from another goroutine.
func (q *Queue) completeAsync(r *Request) {
	q.done <- r
	q.tr.Wake()
	q.unhold()
}

// Pending reports whether Reap has work, cheaply, for the poller's idle check.
func (q *Queue) Pending() bool {
	return len(q.done) != 0 || q.ring != nil && q.ring.pending()
}

// Reap submits the ring's queued entries and completes the requests the
// ring and other goroutines finished.
func (q *Queue) Reap() {
	if q.ring != nil {
		q.reapRing()
	}
	for {
		select {
		case r := <-q.done:
			if r.qos.granted {
				q.resume(r)
				continue
			}
			if r.asyncSlot != 0 {
				q.async.release(r)
			}
			if first := r.pair; first != nil && r.also == nil {
				// A fused second the QoS gate ended before it ran
				// (its wait's bound, an Abort, a change of access):
				// its first fails with it.
				r.pair = nil
				q.abortFirst(first, nvme.StatusFusedFail)
			}
			q.complete(r)
		default:
			return
		}
	}
}

// sqHead is the SQHD of r's completion. With SQ flow control disabled the
// field is reserved: FFFFh in the Connect response, which tells the host
// so, and 0 after (as the Linux target).
func (q *Queue) sqHead(r *Request) uint16 {
	if !q.sqFlowOff {
		return q.sqhd
	}
	if r.Cmd.Opcode() == nvme.OpFabrics && r.Cmd.FabricsType() == nvme.FabricsConnect && r.status == 0 {
		return nvme.SQHDFlowDisabled
	}
	return 0
}

// SQFlowControlDisabled reports whether the host disabled SQ flow control
// on this queue at Connect. Called on the queue's poller.
func (q *Queue) SQFlowControlDisabled() bool { return q.sqFlowOff }

// complete writes the completion entry and gives r back to the transport.
func (q *Queue) complete(r *Request) {
	if r.resvSeen {
		if s := r.ns.resv.snap.Load(); s != nil && s.abortGen != r.resvGen {
			q.resvAborted(r, s)
		}
	}
	r.Rsp.Set(r.result, q.sqHead(r), q.QID, r.Cmd.CID(), r.status)
	now := nanotime()
	if r.nsStats != nil && r.status == 0 {
		q.account(r, now)
	}
	r.release()
	if r.status != 0 {
		q.Stats.ErrorsByType[r.status.Type()].Add(1)
		if q.ctrl != nil {
			q.ctrl.recordError(r, q)
		}
	}
	if q.QID != 0 {
		q.Stats.BusyNanos.Add(uint64(now - r.started))
	}
	q.tr.Complete(r)
}

// Close unbinds the queue from its controller (destroying the controller
// if this is its admin queue) and waits until no other goroutine holds any
// of its requests, so the transport may free their buffers.
func (q *Queue) Close() {
	q.stopConnectDeadline()
	// A fused first command whose second never came is the transport's
	// to take back, like any command that did not run.
	q.fuseFirst = nil
	var stats []nsStat
	if q.ctrl != nil {
		stats = q.retireStats()
		st := &q.ctrl.Subsystem.Stats
		st.mu.Lock()
		for i := range st.errorsRetired {
			st.errorsRetired[i] += q.Stats.ErrorsByType[i].Load()
		}
		st.busyRetired += q.Stats.BusyNanos.Load()
		st.mu.Unlock()
		q.ctrl.detach(q)
		q.log.Info("queue disconnected")
	}
	q.cancelThrottled(stats)
	if q.auth != nil {
		q.auth.end()
	}
	q.closeRing()
	q.waitHolds()
	q.closeAsync()
	unregisterStats(stats)
	if q.jobs != nil {
		close(q.jobs)
	}
}

// waitHolds waits until no other goroutine holds a request, taking the
// ones they hand back meanwhile so that none of them blocks on a full
// handoff. Those requests are not completed: the queue is going away.
func (q *Queue) waitHolds() {
	for q.outstanding.Load() > 0 {
		select {
		case <-q.drained:
		case r := <-q.done:
			q.dropDone(r)
		}
	}
	for {
		select {
		case r := <-q.done:
			q.dropDone(r)
		default:
			return
		}
	}
}

// dropDone lets go of a request handed back at close without completing it.
func (q *Queue) dropDone(r *Request) {
	r.qos.granted = false
	r.release() // a command the QoS gate let go still has its claim
	if r.asyncSlot != 0 {
		q.async.release(r)
	}
}

// hold counts a request held outside the poller: on a worker, in the
// controller (AER), or waiting for its fused partner.
func (q *Queue) hold() { q.outstanding.Add(1) }

// unhold ends a hold. Reaching zero leaves a token for Close, which waits
// for it instead of polling; a token left over from an earlier zero only
// makes Close look again.
func (q *Queue) unhold() {
	if q.outstanding.Add(-1) == 0 {
		select {
		case q.drained <- struct{}{}:
		default:
		}
	}
}

var start = time.Now()

// nanotime is a monotonic clock that does not allocate.
func nanotime() int64 { return int64(time.Since(start)) }
