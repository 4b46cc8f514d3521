package tcp

import (
	"runtime"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Reads and writes over a socket pair through the whole transport and a
// file namespace: the target side must allocate nothing per command.
//
//	go test -run x -bench . -benchmem ./tcp/
func BenchmarkIO(b *testing.B) {
	for _, bc := range []struct {
		name   string
		size   int
		write  bool
		digest bool
		cattr  uint8 // nvme.ConnectSQFlowDisable: reads end with SUCCESS
	}{
		{"read-4k", 4 << 10, false, false, 0},
		{"read-4k-success", 4 << 10, false, false, nvme.ConnectSQFlowDisable},
		{"write-4k", 4 << 10, true, false, 0},
		{"read-128k", 128 << 10, false, false, 0},
		{"read-128k-success", 128 << 10, false, false, nvme.ConnectSQFlowDisable},
		{"write-128k", 128 << 10, true, false, 0},
		{"read-128k-digests", 128 << 10, false, true, 0},
		{"write-128k-digests", 128 << 10, true, true, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := targetListener(b)
			admin := adminHost(b, l, bc.digest, bc.digest)
			h := pair(b, l)
			h.cattr = bc.cattr
			h.icreq(bc.digest, bc.digest)
			if st := h.connectIO(testNQN, admin.cntl, true); st != 0 {
				b.Fatalf("I/O connect: %v", st)
			}
			buf := make([]byte, bc.size)
			// Warm up the pool and the queue's workers.
			for range 16 {
				if st := h.write(0, buf, false); st != 0 {
					b.Fatal(st)
				}
				if st := h.read(0, buf); st != 0 {
					b.Fatal(st)
				}
			}
			b.SetBytes(int64(bc.size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				slba := uint64(i%16) * uint64(bc.size/512)
				var st nvme.Status
				if bc.write {
					st = h.write(slba, buf, false)
				} else {
					st = h.read(slba, buf)
				}
				if st != 0 {
					b.Fatal(st)
				}
			}
			if bc.cattr != 0 && !bc.write && h.successes < b.N {
				b.Fatalf("%d of %d reads completed by SUCCESS", h.successes, b.N)
			}
		})
	}
}

// Reads and writes of 4 KiB and 128 KiB allocate nothing per command, on
// the target's side or the test host's, checked on every test run rather
// than only by BenchmarkIO. The one allocation allowed is a buffer the
// pool makes because the runtime's sync.Pool let one go: it does at a
// garbage collection, and under the race detector it drops a quarter of
// what it is given, on purpose.
func TestIOAllocatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		write bool
	}{
		{"read-4k", 4 << 10, false},
		{"write-4k", 4 << 10, true},
		{"read-128k", 128 << 10, false},
		{"write-128k", 128 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := targetListener(t)
			h := ioHost(t, l, false, false)
			buf := make([]byte, tc.size)
			io := func() {
				var st nvme.Status
				if tc.write {
					st = h.write(0, buf, false)
				} else {
					st = h.read(0, buf)
				}
				if st != 0 {
					t.Fatal(st)
				}
			}
			for range 16 { // the pool's buffers, the queue's workers
				io()
			}
			const n = 100
			made := l.srv.pool.made.Load()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range n {
				io()
			}
			runtime.ReadMemStats(&after)
			// As testing.AllocsPerRun counts: fewer allocations than
			// commands (the runtime's own goroutines make a few), once
			// the pool's refills are set apart. A buffer made is two
			// objects: its bytes, and the pointer the pool hands out.
			refills := 2 * uint64(l.srv.pool.made.Load()-made)
			if allocs := after.Mallocs - before.Mallocs - refills; allocs >= n {
				t.Fatalf("%d allocations in %d commands besides %d of buffers the pool made again, want fewer than one a command", allocs, n, refills)
			}
		})
	}
}
