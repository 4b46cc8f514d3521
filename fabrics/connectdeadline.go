package fabrics

import (
	"maps"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// ConnectTimeout is how long a queue pair may go without a successful
// Connect command before the target disconnects it. Until Connect, a
// queue pair holds a place of limits.max_queue_pairs and its transport's
// resources (a poller, registered memory), so hosts that open queue pairs
// and never connect could otherwise lock every other host out. The Linux
// host sends the admin queue's Connect as soon as the transport connection
// is up, and those of its I/O queues once all of them are up: an I/O
// queue waits for its siblings' set-up (17 ms each on average in the
// emulated soft-RoCE guest of the end-to-end tests), so 10 s leaves room
// for hundreds. From Connect on, keep alive (or, while the host authenticates,
// the authentication deadline in auth.go) bounds the queue instead.
const ConnectTimeout = 10 * time.Second

// connectDeadline is a queue's timer from its creation to its first
// successful Connect. The timer fires on the clock's goroutine, Connect
// and Close run on the poller: mu decides which comes first.
type connectDeadline struct {
	mu    sync.Mutex
	timer Timer
	over  bool // connected, closed or expired: nothing more to do
}

// armConnectDeadline starts the queue's connect deadline. Called once, by
// NewQueue.
func (q *Queue) armConnectDeadline() {
	log := q.log // the poller replaces q.log at Connect
	d := &q.connectDeadline
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer = q.target.clock.AfterFunc(ConnectTimeout, func() { q.connectExpired(log) })
}

// stopConnectDeadline ends the deadline: the queue connected, or closed.
func (q *Queue) stopConnectDeadline() {
	d := &q.connectDeadline
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.over {
		return
	}
	d.over = true
	if d.timer != nil {
		d.timer.Stop()
	}
}

// connectExpired disconnects a queue that has not connected in time.
func (q *Queue) connectExpired(log *logrus.Entry) {
	d := &q.connectDeadline
	d.mu.Lock()
	expired := !d.over
	d.over = true
	d.mu.Unlock()
	if !expired {
		return
	}
	q.target.connectTimeouts.add(q.port.ID, time.Now(), log.WithField("connect_timeout", ConnectTimeout.String()),
		"no Connect command on the queue pair in time; disconnecting it (a host that does not speak NVMe-oF, or one that stalled)")
	q.tr.Disconnect()
}

// portCounts counts events by port, and logs their warnings at most once
// per LogEvery per port: a peer that opens queue pairs and stays silent
// would otherwise write a line for each.
type portCounts struct {
	mu   sync.Mutex
	m    map[uint16]uint64
	logs map[uint16]*LogLimit
}

// add counts an event on port at now and logs msg on log, rate-limited.
func (c *portCounts) add(port uint16, now time.Time, log *logrus.Entry, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m, c.logs = map[uint16]uint64{}, map[uint16]*LogLimit{}
	}
	c.m[port]++
	l := c.logs[port]
	if l == nil {
		l = new(LogLimit)
		c.logs[port] = l
	}
	l.Warn(now, log, msg)
}

func (c *portCounts) counts() map[uint16]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

// ConnectTimeouts counts, by port, the queue pairs disconnected because no
// Connect command came within ConnectTimeout.
func (t *Target) ConnectTimeouts() map[uint16]uint64 { return t.connectTimeouts.counts() }
