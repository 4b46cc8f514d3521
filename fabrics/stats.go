package fabrics

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// LatencyBuckets are the upper bounds of the I/O latency histograms.
var LatencyBuckets = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	time.Second, 5 * time.Second,
}

// LatencyHistSize is the number of histogram counters: one per bucket
// bound and the last for +Inf.
const LatencyHistSize = len(LatencyBuckets) + 1

// IOStats are the I/O counters of one namespace as seen by one queue (or,
// summed, by all). Each queue writes its own from its poller, so counting
// costs the I/O path no allocation and no shared cache line; readers sum
// them with atomic loads.
type IOStats struct {
	Reads, Writes             atomic.Uint64
	BytesRead, BytesWritten   atomic.Uint64
	ReadNanos, WriteNanos     atomic.Uint64
	Flushes, Discards, Zeroes atomic.Uint64
	ReadHist, WriteHist       [LatencyHistSize]atomic.Uint64
	Inflight                  atomic.Int64 // commands dispatched, not completed, but the write class
	// InflightWrites counts the write-class commands dispatched, not
	// completed: what a change of who may write waits for (fence.go).
	InflightWrites atomic.Int64
	Writing        atomic.Int64 // writes past the fused-pair gate (writeGate)

	ctrl *Controller // of the queue that counts here; fixed
	q    *Queue      // the queue that counts here; fixed
}

// IOSnapshot is a plain copy of IOStats.
type IOSnapshot struct {
	Reads, Writes             uint64
	BytesRead, BytesWritten   uint64
	ReadNanos, WriteNanos     uint64
	Flushes, Discards, Zeroes uint64
	ReadHist, WriteHist       [LatencyHistSize]uint64
}

func (s *IOStats) addTo(out *IOSnapshot) {
	out.Reads += s.Reads.Load()
	out.Writes += s.Writes.Load()
	out.BytesRead += s.BytesRead.Load()
	out.BytesWritten += s.BytesWritten.Load()
	out.ReadNanos += s.ReadNanos.Load()
	out.WriteNanos += s.WriteNanos.Load()
	out.Flushes += s.Flushes.Load()
	out.Discards += s.Discards.Load()
	out.Zeroes += s.Zeroes.Load()
	for i := range s.ReadHist {
		out.ReadHist[i] += s.ReadHist[i].Load()
		out.WriteHist[i] += s.WriteHist[i].Load()
	}
}

func (o *IOSnapshot) add(p *IOSnapshot) {
	o.Reads += p.Reads
	o.Writes += p.Writes
	o.BytesRead += p.BytesRead
	o.BytesWritten += p.BytesWritten
	o.ReadNanos += p.ReadNanos
	o.WriteNanos += p.WriteNanos
	o.Flushes += p.Flushes
	o.Discards += p.Discards
	o.Zeroes += p.Zeroes
	for i := range o.ReadHist {
		o.ReadHist[i] += p.ReadHist[i]
		o.WriteHist[i] += p.WriteHist[i]
	}
}

func bucket(d time.Duration) int {
	for i, b := range LatencyBuckets {
		if d <= b {
			return i
		}
	}
	return len(LatencyBuckets)
}

// nsStat pairs a namespace with one queue's counters for it.
// IOStats also name the controller whose queue writes them, so that a fence
// finds a host's commands even on queues that are closing.
type nsStat struct {
	ns    *Namespace
	stats *IOStats
}

// statsFor returns the queue's counters for ns, creating them on the
// namespace's first command (the only allocation, once per queue and
// namespace). Poller only; the list is replaced, never changed in place,
// so scrapes read it without a lock.
func (q *Queue) statsFor(ns *Namespace) *IOStats {
	list := q.nsStats.Load()
	if list != nil {
		for i := range *list {
			if (*list)[i].ns == ns {
				return (*list)[i].stats
			}
		}
	}
	var next []nsStat
	if list != nil {
		next = append(next, *list...)
	}
	s := &IOStats{ctrl: q.ctrl, q: q}
	next = append(next, nsStat{ns, s})
	q.nsStats.Store(&next)
	ns.statsMu.Lock()
	ns.live = append(ns.live, s)
	ns.statsMu.Unlock()
	return s
}

// account records a completed I/O command in the namespace's counters.
func (q *Queue) account(r *Request, now int64) {
	s := r.nsStats
	lat := time.Duration(now - r.started)
	switch r.Cmd.Opcode() {
	case nvme.IORead:
		s.Reads.Add(1)
		s.BytesRead.Add(uint64(r.length))
		s.ReadNanos.Add(uint64(lat))
		s.ReadHist[bucket(lat)].Add(1)
	case nvme.IOWrite:
		s.Writes.Add(1)
		s.BytesWritten.Add(uint64(r.length))
		s.WriteNanos.Add(uint64(lat))
		s.WriteHist[bucket(lat)].Add(1)
	case nvme.IOFlush:
		s.Flushes.Add(1)
	case nvme.IODatasetMgmt:
		s.Discards.Add(1)
	case nvme.IOWriteZeroes:
		s.Zeroes.Add(1)
	}
}

// retireStats folds a closing queue's counters into its namespaces, so
// totals survive disconnects. It returns them for unregisterStats.
func (q *Queue) retireStats() []nsStat {
	list := q.nsStats.Load()
	if list == nil {
		return nil
	}
	for _, e := range *list {
		var snap IOSnapshot
		e.stats.addTo(&snap)
		e.ns.statsMu.Lock()
		e.ns.retired.add(&snap)
		e.ns.statsMu.Unlock()
	}
	q.nsStats.Store(nil)
	return *list
}

// unregisterStats forgets a closed queue's counters once no backend call
// of it can be running.
func unregisterStats(list []nsStat) {
	for _, e := range list {
		e.ns.statsMu.Lock()
		e.ns.live = slices.DeleteFunc(e.ns.live, func(s *IOStats) bool { return s == e.stats })
		e.ns.statsMu.Unlock()
	}
}

// NamespaceStats sums the namespace's counters over live and past queues.
func (s *Subsystem) NamespaceStats(ns *Namespace) IOSnapshot {
	ns.statsMu.Lock()
	out := ns.retired
	ns.statsMu.Unlock()
	for _, c := range s.Controllers() {
		c.mu.Lock()
		for _, q := range c.queues {
			if q == nil {
				continue
			}
			if list := q.nsStats.Load(); list != nil {
				for _, e := range *list {
					if e.ns == ns {
						e.stats.addTo(&out)
					}
				}
			}
		}
		c.mu.Unlock()
	}
	return out
}

// SubsystemStats are the counters of a subsystem that are not per namespace.
type SubsystemStats struct {
	Refused          Refusals
	KeepAliveExpired atomic.Uint64
	AuthFailures     AuthFailures
	mu               sync.Mutex
	errorsRetired    [nvme.StatusCodeTypes]uint64 // by status code type, of closed queues
	busyRetired      uint64                       // busy nanoseconds of closed queues
	// The counters of removed namespaces, kept for the SMART log of the
	// hosts that saw them: removedIO of those every host saw, removedFor
	// of those limited to some hosts, by host. removing holds the hosts
	// of a limited namespace from its removal until its counters are
	// final (retireNamespace).
	removedIO  IOSnapshot
	removedFor map[string]*IOSnapshot
	removing   map[uint32]map[string]bool
}

// Refusals counts refused connects by reason and port.
type Refusals struct {
	mu sync.Mutex
	m  map[RefusedKey]uint64
}

// RefusedKey says why and where a connect was refused.
type RefusedKey struct {
	Reason string
	Port   uint16
}

// Refuse counts one refused connect.
func (r *Refusals) Refuse(reason string, port uint16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[RefusedKey]uint64{}
	}
	r.m[RefusedKey{reason, port}]++
}

// Counts returns the refused connects so far.
func (r *Refusals) Counts() map[RefusedKey]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.m)
}

// ErrorsByType sums commands completed with an error, by status code type.
func (s *Subsystem) ErrorsByType() [nvme.StatusCodeTypes]uint64 {
	s.Stats.mu.Lock()
	out := s.Stats.errorsRetired
	s.Stats.mu.Unlock()
	for _, c := range s.Controllers() {
		c.mu.Lock()
		for _, q := range c.queues {
			if q != nil {
				for i := range out {
					out[i] += q.Stats.ErrorsByType[i].Load()
				}
			}
		}
		c.mu.Unlock()
	}
	return out
}

// healthCounters sums, for the controller's SMART log, the I/O counters
// of the namespaces its host sees, present and removed, or of namespace
// nsid alone unless it is 0 or FFFFFFFFh (the caller checked that the host
// sees it), and the busy time of the subsystem's queues. Counting the
// namespaces hidden from the host would tell it how busy other tenants
// are.
func (c *Controller) healthCounters(nsid uint32) (io IOSnapshot, busyNanos uint64) {
	s := c.Subsystem
	whole := nsid == 0 || nsid == nvme.NSIDBroadcast
	s.Stats.mu.Lock()
	if whole {
		io = s.Stats.removedIO
		if r := s.Stats.removedFor[c.HostNQN]; r != nil {
			io.add(r)
		}
	}
	busyNanos = s.Stats.busyRetired
	s.Stats.mu.Unlock()
	ids := []uint32{nsid}
	if whole {
		ids = c.visibleNamespaceIDs()
	}
	for _, id := range ids {
		if ns := s.Namespace(id); ns != nil {
			snap := s.NamespaceStats(ns)
			io.add(&snap)
		}
	}
	for _, other := range s.Controllers() {
		other.mu.Lock()
		for _, q := range other.queues {
			if q != nil {
				busyNanos += q.Stats.BusyNanos.Load()
			}
		}
		other.mu.Unlock()
	}
	return io, busyNanos
}

// retireNamespace keeps a removed namespace's counters in the health
// totals of the hosts that saw it.
func (s *Subsystem) retireNamespace(ns *Namespace) {
	snap := s.NamespaceStats(ns)
	s.Stats.mu.Lock()
	defer s.Stats.mu.Unlock()
	hosts, limited := s.Stats.removing[ns.ID]
	if !limited {
		s.Stats.removedIO.add(&snap)
		return
	}
	delete(s.Stats.removing, ns.ID)
	if s.Stats.removedFor == nil {
		s.Stats.removedFor = map[string]*IOSnapshot{}
	}
	for h := range hosts {
		if s.Stats.removedFor[h] == nil {
			s.Stats.removedFor[h] = new(IOSnapshot)
		}
		s.Stats.removedFor[h].add(&snap)
	}
}
