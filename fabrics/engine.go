package fabrics

import "fmt"

// IOEngine is how queues run the backend calls that may sleep (file and
// block namespaces).
type IOEngine int32

const (
	// EngineThreads runs them on workersPerQueue goroutines per queue:
	// at most that many of a queue's I/Os are in the kernel at once.
	EngineThreads IOEngine = iota
	// EngineIOURing issues reads, writes and flushes of file-backed
	// namespaces through one io_uring per queue, from its poller, so the
	// host's whole queue depth reaches the kernel. Other commands (Write
	// Zeroes, Dataset Management, Compare, fused pairs) stay on workers.
	EngineIOURing
)

func (e IOEngine) String() string {
	switch e {
	case EngineThreads:
		return "threads"
	case EngineIOURing:
		return "io_uring"
	}
	return fmt.Sprintf("IOEngine(%d)", int32(e))
}

// SetIOEngine chooses the engine for queues that issue their first
// blocking I/O from now on; the daemon sets it once, before serving. The
// caller has checked that the engine works here (uring.Probe).
func (t *Target) SetIOEngine(e IOEngine) { t.ioEngine.Store(int32(e)) }

// IOEngine is the engine new queues use.
func (t *Target) IOEngine() IOEngine { return IOEngine(t.ioEngine.Load()) }
