package fabrics

import (
	"path/filepath"
	"testing"

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

// nonBlockingMem is memBackend run on the poller, as nullblk is.
type nonBlockingMem struct{ *memBackend }

func (nonBlockingMem) NonBlocking() bool { return true }

// benchQueue returns an I/O queue bound to a controller of a subsystem whose
// namespace 1 is an in-memory, non-blocking backend.
func benchQueue(b *testing.B) (*Queue, *nullTransport) {
	tg, p, _ := testTarget(b)
	s := NewSubsystem("nqn.2026-11.io.example:bench", "", "", true)
	ns, err := NewNamespace(1, nonBlockingMem{newMem(1<<20, 512)}, false, [16]byte{7})
	if err != nil {
		b.Fatal(err)
	}
	s.AddNamespace(ns)
	tg.AddSubsystem(s)
	return benchQueueOn(b, tg, p, s.NQN)
}

// benchQueueOn connects an I/O queue to subsystem nqn of tg.
func benchQueueOn(b testing.TB, tg *Target, p *Port, nqn string) (*Queue, *nullTransport) {
	s := tg.Subsystem(nqn)
	h := &host{t: nil, admin: NewLoopQueue(tg, p, 0, 32)}
	rsp, err := h.admin.Submit(connectCmd(0, 31, 0, false), connectData(s.NQN, testHost, 0xffff))
	if err != nil || rsp.Status() != 0 {
		b.Fatalf("connect: %v %v", err, rsp)
	}
	c := newCmd(0)
	c.SetProperty(true, false, nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
	h.admin.Submit(c, nil)
	tr := &nullTransport{}
	q := NewQueue(tg, p, 1, 128, tr)
	r := &Request{Cmd: connectCmd(1, 127, 0, true), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	q.Prepare(r)
	r.MapInline(connectData(s.NQN, testHost, uint16(rsp.Result())))
	q.Execute(r)
	if r.status != 0 {
		b.Fatalf("io connect: %v", r.status)
	}
	tr.completed = 0
	b.Cleanup(func() { q.Close(); h.admin.Close() })
	return q, tr
}

// benchIO runs 4 KiB commands of opcode op through the fabrics half of
// the path: decode, validate, execute against a non-blocking backend,
// complete. It must not allocate.
func benchIO(b *testing.B, op uint8) {
	q, tr := benchQueue(b)
	buf := make([]byte, MaxDataTransfer)
	r := &Request{Cmd: newCmd(op), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	r.Cmd.SetNSID(1)
	r.Cmd.SetCDW(12, 7)
	keyed(r.Cmd, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Cmd.SetSLBA(uint64(i*8) % 2040)
		if !q.Prepare(r) {
			b.Fatalf("prepare failed: %v", r.status)
		}
		r.Data = buf[:r.Len]
		q.Execute(r)
	}
	if tr.completed != b.N {
		b.Fatalf("%d completions for %d commands", tr.completed, b.N)
	}
}

func BenchmarkReadPath(b *testing.B)  { benchIO(b, nvme.IORead) }
func BenchmarkWritePath(b *testing.B) { benchIO(b, nvme.IOWrite) }

// BenchmarkRingReadPath is the io_uring path of a 4 KiB read of a file
// namespace: decode, validate, queue on the ring, submit, reap, complete.
// It must not allocate.
func BenchmarkRingReadPath(b *testing.B) {
	tg, p, _ := testTarget(b)
	fb, err := backend.Open("file", backend.Options{Path: filepath.Join(b.TempDir(), "img"), Size: 1 << 20, Buffered: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fb.Close() })
	ns, _ := NewNamespace(2, fb, false, [16]byte{8})
	tg.Subsystem(testNQN).AddNamespace(ns)
	tg.SetIOEngine(EngineIOURing)
	q, tr := benchQueueOn(b, tg, p, testNQN)
	buf := make([]byte, MaxDataTransfer)
	r := &Request{Cmd: newCmd(nvme.IORead), Rsp: make(nvme.Completion, nvme.CompletionSize)}
	r.Cmd.SetNSID(2)
	r.Cmd.SetCDW(12, 7)
	keyed(r.Cmd, 4096)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
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
	if q.ring == nil {
		b.Fatal("the reads did not go through the ring")
	}
}
