package fabrics

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// BenchmarkWritePathReserved is BenchmarkWritePath with a reservation
// held on the namespace: Write Exclusive, Registrants Only, the writing
// host the last of four registrants, so every write scans them all. It
// must not allocate either.
func BenchmarkWritePathReserved(b *testing.B) {
	tg, p, s, cntlid := benchController(b)
	reserveForBench(s.Namespace(1))
	q, tr := benchQueue(b, tg, p, s, cntlid, 1)
	measureIOLoop(b, q, nvme.IOWrite, &tr.completed)
}

// reserveForBench holds a reservation on ns: Write Exclusive, Registrants
// Only, the benchmarks' host the last of four registrants, so that every
// write scans them all.
func reserveForBench(ns *Namespace) {
	ns.resv.snap.Store(&resvSnapshot{ReservationState: ReservationState{
		Type: nvme.ResvWriteExclusiveRegOnly, Holder: [16]byte{1},
		Registrants: []Registrant{{[16]byte{1}, 1}, {[16]byte{2}, 2}, {[16]byte{3}, 3}, {[16]byte{9}, 9}},
	}})
}
