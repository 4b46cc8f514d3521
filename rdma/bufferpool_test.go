package rdma

import "testing"

// Requests waiting for a data buffer get one in arrival order, and a
// buffer nobody waits for goes back to the free list.
func TestBufferPoolHandsBuffersInOrder(t *testing.T) {
	p := bufferPool{free: []int32{1, 0}}
	if a, b := p.take(10), p.take(11); a != 0 || b != 1 {
		t.Fatalf("took %d and %d, want 0 and 1", a, b)
	}
	if d := p.take(12); d != -1 {
		t.Fatalf("took %d from an empty pool", d)
	}
	if d := p.take(13); d != -1 {
		t.Fatalf("took %d from an empty pool", d)
	}
	if next := p.give(1); next != 12 {
		t.Fatalf("buffer went to request %d, want the oldest waiting, 12", next)
	}
	if next := p.give(0); next != 13 {
		t.Fatalf("buffer went to request %d, want 13", next)
	}
	if next := p.give(1); next != -1 || len(p.free) != 1 || p.free[0] != 1 {
		t.Fatalf("give with nobody waiting: %d, free %v", next, p.free)
	}
}

func TestLargeBuffers(t *testing.T) {
	for _, c := range []struct {
		depth int
		admin bool
		want  int
	}{{32, true, 1}, {2, false, 2}, {128, false, 4}, {1024, false, 32}} {
		if got := largeBuffers(c.depth, c.admin); got != c.want {
			t.Errorf("largeBuffers(%d, %v) = %d, want %d", c.depth, c.admin, got, c.want)
		}
	}
}
