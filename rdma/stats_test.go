package rdma

import (
	"slices"
	"testing"
)

// A device's shared receive queues are reported by kind: the I/O queues
// of every in-capsule size summed, the admin queue apart, and a kind the
// device has none of left out.
func TestSRQStatsByQueue(t *testing.T) {
	ring := func(n int, admin bool, posted int64) *recvRing {
		r := &recvRing{cmd: make([][]byte, n), admin: admin}
		r.posted.Store(posted)
		return r
	}
	d := &device{name: "rxe0", rings: map[int]*recvRing{
		0:    ring(4096, false, 4000),
		8192: ring(1024, false, 1024),
		-1:   ring(256, true, 250),
	}}
	got := d.srqStats()
	want := []SRQStats{{"rxe0", "io", 5120, 5024}, {"rxe0", "admin", 256, 250}}
	if !slices.Equal(got, want) {
		t.Errorf("%+v, want %+v", got, want)
	}
	d.rings = map[int]*recvRing{0: ring(64, false, 64)}
	if got := d.srqStats(); !slices.Equal(got, []SRQStats{{"rxe0", "io", 64, 64}}) {
		t.Errorf("no admin queue: %+v", got)
	}
}
