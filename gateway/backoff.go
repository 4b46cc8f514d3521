package gateway

import "time"

// backoff spaces out the tries of something that keeps failing (the
// rebuild of a fenced RADOS client, the preferred gateway's announcement
// for a failback): each failure doubles the wait, from a floor up to a
// ceiling, and the next try is due that long after it; a success starts
// the count again.
type backoff struct {
	due  time.Duration // the next try is due then
	wait time.Duration // the last failure's wait; 0 after a success
}

// failed counts a failure at now: the next try is due after the wait,
// which doubles from floor up to ceiling.
func (b *backoff) failed(now, floor, ceiling time.Duration) {
	b.wait = min(max(2*b.wait, floor), ceiling)
	b.due = now + b.wait
}

// reset makes a try due at once, and the next failure's wait the floor.
func (b *backoff) reset() { *b = backoff{} }
