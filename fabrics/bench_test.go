package fabrics

import (
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// nullTransport completes requests into a counter, like a transport whose
// sends never fail.
type nullTransport struct{ completed int }

func (n *nullTransport) Complete(*Request) { n.completed++ }
func (n *nullTransport) Wake()             {}
func (n *nullTransport) Disconnect()       {}
func (n *nullTransport) Peer() string      { return "bench" }
func (n *nullTransport) TRType() uint8     { return nvme.TransportRDMA }

// benchController connects a controller to a subsystem whose namespace 1
// is a 1 GiB nullblk backend (non-blocking, run on the poller) and returns
// the controller ID for its I/O queues.
func benchController(b testing.TB) (*Target, *Port, *Subsystem, uint16) {
	tg, p, _ := testTarget(b)
	s := NewSubsystem("nqn.2026-11.io.example:bench", "", "", true)
	null, err := backend.Open("nullblk", backend.Options{Size: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	ns, err := NewNamespace(1, null, false, [16]byte{7})
	if err != nil {
		b.Fatal(err)
	}
	s.AddNamespace(ns)
	tg.AddSubsystem(s)
	return tg, p, s, enableController(b, tg, p, s)
}

// enableController connects and enables a controller of s and returns its ID.
func enableController(b testing.TB, tg *Target, p *Port, s *Subsystem) uint16 {
	admin := NewLoopQueue(tg, p, 0, 32)
	b.Cleanup(admin.Close)
	rsp, err := admin.Submit(connectCmd(0, 31, 0, false), connectData(s.NQN, testHost, 0xffff))
	if err != nil || rsp.Status() != 0 {
		b.Fatalf("connect: %v %v", err, rsp)
	}
	c := newCmd(0)
	c.SetProperty(true, false, nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
	admin.Submit(c, nil)
	return uint16(rsp.Result())
}

// benchQueueOn connects a controller to subsystem nqn of tg and gives it
// I/O queue 1.
func benchQueueOn(b testing.TB, tg *Target, p *Port, nqn string) (*Queue, *nullTransport) {
	s := tg.Subsystem(nqn)
	return benchQueue(b, tg, p, s, enableController(b, tg, p, s), 1)
}

// benchQueue connects I/O queue qid of controller cntlid, depth 128, on
// the null transport.
func benchQueue(b testing.TB, tg *Target, p *Port, s *Subsystem, cntlid, qid uint16) (*Queue, *nullTransport) {
	tr := &nullTransport{}
	q := NewQueue(tg, p, qid, 128, tr)
	r := &Request{Cmd: connectCmd(qid, 127, 0, true), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	q.Prepare(r)
	r.MapInline(connectData(s.NQN, testHost, cntlid))
	q.Execute(r)
	if r.status != 0 {
		b.Fatalf("io connect qid %d: %v", qid, r.status)
	}
	tr.completed = 0
	b.Cleanup(q.Close)
	return q, tr
}

// ioLoop runs n 4 KiB commands of opcode op on q, as a transport's poller
// does: decode, validate, execute against the non-blocking backend,
// complete. It must not allocate.
func ioLoop(b testing.TB, q *Queue, op uint8, n int) {
	step := ioStep(b, q, op)
	for i := 0; i < n; i++ {
		if !step(i) {
			return
		}
	}
}

// ioStep returns a function that runs the i-th 4 KiB command of opcode op
// on q, reusing one request and buffer, and reports whether it was
// prepared.
func ioStep(b testing.TB, q *Queue, op uint8) func(i int) bool {
	buf := make([]byte, MaxDataTransfer)
	r := &Request{Cmd: newCmd(op), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	r.Cmd.SetNSID(1)
	r.Cmd.SetCDW(12, 7)
	keyed(r.Cmd, 4096)
	return func(i int) bool {
		r.Cmd.SetSLBA(uint64(i*8) % (1 << 21))
		if !q.Prepare(r) {
			b.Errorf("prepare failed: %v", r.status)
			return false
		}
		r.Data = buf[:r.Len]
		q.Execute(r)
		return true
	}
}

// The I/O path allocates nothing per command, checked on every test run
// rather than only by the benchmarks: reads, writes, and writes checked
// against a reservation whose registrants they scan.
func TestIOPathAllocatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		op       uint8
		reserved bool
	}{
		{"read", nvme.IORead, false},
		{"write", nvme.IOWrite, false},
		{"write-reserved", nvme.IOWrite, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, p, s, cntlid := benchController(t)
			if tc.reserved {
				reserveForBench(s.Namespace(1))
			}
			q, tr := benchQueue(t, tg, p, s, cntlid, 1)
			step := ioStep(t, q, tc.op)
			ioLoop(t, q, tc.op, 64) // warm up: the namespace's counters, the pools
			i := 0
			allocs := testing.AllocsPerRun(200, func() {
				step(i)
				i++
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per command, want 0", allocs)
			}
			if tr.completed != 64+201 { // AllocsPerRun runs once more to warm up
				t.Fatalf("%d completions, want %d", tr.completed, 64+201)
			}
		})
	}
}

// cpuTime is the CPU time (user and system, every thread) this process has
// used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportPerCore adds iops/core: commands per second of process CPU time,
// which counts what the garbage collector and runtime spend too and does
// not depend on how many cores were free.
func reportPerCore(b *testing.B, ios int, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(ios)/cpu.Seconds(), "iops/core")
	}
}

// benchIO runs 4 KiB commands of opcode op on one I/O queue.
func benchIO(b *testing.B, op uint8) {
	tg, p, s, cntlid := benchController(b)
	q, tr := benchQueue(b, tg, p, s, cntlid, 1)
	measureIOLoop(b, q, op, &tr.completed)
}

// measureIOLoop runs b.N commands of opcode op on q, every one of which
// must complete (completed counts them), and reports iops/core.
func measureIOLoop(b *testing.B, q *Queue, op uint8, completed *int) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	ioLoop(b, q, op, b.N)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if *completed != b.N {
		b.Fatalf("%d completions for %d commands", *completed, b.N)
	}
	reportPerCore(b, b.N, cpu)
}

// benchParallel runs b.N commands of opcode op split over GOMAXPROCS I/O
// queues of one controller, each driven by its own goroutine as each RDMA
// queue pair has its own poller: what they share (the namespace, its
// counters, the controller) shows up as a lower iops/core than one queue
// gets.
func benchParallel(b *testing.B, op uint8) {
	tg, p, s, cntlid := benchController(b)
	nq := runtime.GOMAXPROCS(0)
	qs := make([]*Queue, nq)
	trs := make([]*nullTransport, nq)
	for i := range qs {
		qs[i], trs[i] = benchQueue(b, tg, p, s, cntlid, uint16(i+1))
	}
	per := (b.N + nq - 1) / nq
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var wg sync.WaitGroup
	for i := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ioLoop(b, qs[i], op, per)
		}()
	}
	wg.Wait()
	cpu := cpuTime() - cpu0
	b.StopTimer()
	for i, tr := range trs {
		if tr.completed != per {
			b.Fatalf("queue %d: %d completions for %d commands", i+1, tr.completed, per)
		}
	}
	reportPerCore(b, per*nq, cpu)
}

func BenchmarkReadPath(b *testing.B)          { benchIO(b, nvme.IORead) }
func BenchmarkWritePath(b *testing.B)         { benchIO(b, nvme.IOWrite) }
func BenchmarkReadPathParallel(b *testing.B)  { benchParallel(b, nvme.IORead) }
func BenchmarkWritePathParallel(b *testing.B) { benchParallel(b, nvme.IOWrite) }

// BenchmarkRingReadPath is the io_uring path of a 4 KiB read of a file
// namespace: decode, validate, queue on the ring, submit, reap, complete.
// It must not allocate.
func BenchmarkRingReadPath(b *testing.B) {
	tg, p, s, cntlid := benchController(b)
	fb, err := backend.Open("file", backend.Options{Path: filepath.Join(b.TempDir(), "img"), Size: 1 << 20, Buffered: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fb.Close() })
	ns, _ := NewNamespace(2, fb, false, [16]byte{8})
	s.AddNamespace(ns)
	tg.SetIOEngine(EngineIOURing)
	q, tr := benchQueue(b, tg, p, s, cntlid, 1)
	buf := make([]byte, MaxDataTransfer)
	r := &Request{Cmd: newCmd(nvme.IORead), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	r.Cmd.SetNSID(2)
	r.Cmd.SetCDW(12, 7)
	keyed(r.Cmd, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		r.Cmd.SetSLBA(uint64(i*8) % 2040)
		if !q.Prepare(r) {
			b.Fatalf("prepare failed: %v", r.status)
		}
		r.Data = buf[:r.Len]
		q.Execute(r)
		for tr.completed == i {
			if q.Pending() {
				q.Reap()
			}
		}
		if r.status != 0 {
			b.Fatalf("read: %v", r.status)
		}
	}
	reportPerCore(b, b.N, cpuTime()-cpu0)
	if q.ring == nil {
		b.Fatal("the reads did not go through the ring")
	}
}
