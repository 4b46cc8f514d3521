package tcp

import "testing"

// tcp.buffer_pool resizes the shared pool: a larger one lends more at
// once and wakes the connections waiting for a buffer; a smaller one
// lends no more until enough comes back.
func TestPoolSetLimit(t *testing.T) {
	p := NewPool(MaxBuffer)
	var a account
	big := p.get(MaxBuffer, &a, false)
	if big == nil || p.get(4096, &a, true) != nil {
		t.Fatal("a 1 MiB pool lent more than 1 MiB")
	}
	c := &Conn{}
	p.wait(c)
	p.SetLimit(2 * MaxBuffer)
	if !c.granted.Load() {
		t.Fatal("a waiting connection was not woken when the pool grew")
	}
	small := p.get(4096, &a, true)
	if small == nil || p.Limit() != 2*MaxBuffer {
		t.Fatalf("grown pool: buffer %v, limit %d", small != nil, p.Limit())
	}
	p.SetLimit(0)
	if p.Limit() != MaxBuffer {
		t.Fatalf("limit %d, want at least MaxBuffer", p.Limit())
	}
	p.put(small, &a)
	if p.get(4096, &a, true) != nil {
		t.Fatal("a shrunk pool lent past its limit")
	}
	p.put(big, &a)
	if p.get(4096, &a, true) == nil {
		t.Fatal("nothing lent, yet the pool refused 4 KiB")
	}
}
