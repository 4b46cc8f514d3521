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

// In-capsule data lent past the limit (getOver) is capped per
// connection at maxOver; what putOver takes back may be lent again, and
// another connection has a cap of its own.
func TestPoolOverLimitCapped(t *testing.T) {
	p := NewPool(MaxBuffer)
	var a, b account
	full := p.get(MaxBuffer, &a, false)
	if full == nil {
		t.Fatal("an empty pool refused MaxBuffer")
	}
	var over []*[]byte
	for range maxOver / 8192 {
		buf := p.getOver(8192, &a)
		if buf == nil {
			t.Fatalf("getOver refused after %d bytes, want %d", a.over, maxOver)
		}
		over = append(over, buf)
	}
	if p.getOver(8192, &a) != nil {
		t.Fatalf("getOver lent past maxOver: the connection holds %d bytes over the limit", a.over)
	}
	if p.getOver(8192, &b) == nil {
		t.Fatal("another connection's in-capsule data found the cap of the first")
	}
	p.putOver(over[0], &a)
	if p.getOver(8192, &a) == nil {
		t.Fatal("a buffer given back past the limit could not be lent again")
	}
}
