package rdma

import "sync"

// connTable is a listener's bookkeeping of its queue pairs, and the rule
// that keeps its event channel alive: every queue pair's CM id lives on
// the channel until the queue pair is gone, so the channel may go only
// once the listener is closing and no queue pair is live.
//
// Registration and closing take the same lock, so a queue pair set up
// while the listener closes is either refused (add returns false) or in
// the snapshot close returns, to be disconnected: never missed.
//
// wake (a write to the listener's eventfd) runs under the lock too, when
// the listener starts closing and when its last connection goes: drained
// does not report true, so the event loop does not close the eventfd,
// until the last wake is done. A wake after the close would write to
// whatever file reused the descriptor.
type connTable[K comparable, V any] struct {
	mu      sync.Mutex
	closing bool
	conns   map[K]V // connected, looked up by CM events
	live    int     // added and not yet gone: their CM ids exist
	wake    func()
}

func newConnTable[K comparable, V any](wake func()) *connTable[K, V] {
	return &connTable[K, V]{conns: map[K]V{}, wake: wake}
}

// add registers a new connection, unless the listener is closing.
func (t *connTable[K, V]) add(k K, v V) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return false
	}
	t.conns[k] = v
	t.live++
	return true
}

func (t *connTable[K, V]) lookup(k K) (V, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.conns[k]
	return v, ok
}

// forget stops routing events to k; its CM id still exists.
func (t *connTable[K, V]) forget(k K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, k)
}

// gone records that a connection's CM id was destroyed. The last one of
// a closing listener wakes the event loop: the channel may go.
func (t *connTable[K, V]) gone() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live--
	if t.closing && t.live == 0 {
		t.wake()
	}
}

// close marks the listener closing, wakes the event loop and returns the
// connections to disconnect; ok is false if it was closing already.
func (t *connTable[K, V]) close() (conns []V, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return nil, false
	}
	t.closing = true
	t.wake()
	for _, v := range t.conns {
		conns = append(conns, v)
	}
	return conns, true
}

func (t *connTable[K, V]) isClosing() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closing
}

// drained reports whether the listener is closing with no live connection.
func (t *connTable[K, V]) drained() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closing && t.live == 0
}

func (t *connTable[K, V]) connected() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

func (t *connTable[K, V]) liveCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}
