package tcp

import (
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// The data deadline. Buffers lent to a connection come back when its
// host sends the data of an R2T, or reads the C2HData and responses
// queued for it. A host that does neither pins its buffers, and its share
// of the pool with them, for as long as it keeps the connection. So while
// a connection has R2Ts outstanding, one of them must get all its data
// within the data timeout; while the socket is full, one response must
// go out whole within it. Otherwise the connection alone closes, which
// gives its buffers back. Only this connection's own progress counts: keep
// alive on the admin queue, or reads on this one, do not excuse an R2T
// whose data never comes.

// DefaultDataTimeout is the data timeout unless configured
// (tcp.data_timeout_seconds): five seconds is 1 MiB at 200 KiB/s, far
// beyond any working path, and returns the buffers of a stalled host well
// within the 30 s I/O timeout of the other hosts, whose commands wait for
// them. It must end a stalled R2T within the 10 s a change of access
// waits for the writes in flight (fabrics' fence): no recheck can end a
// write whose data the host was asked for.
const DefaultDataTimeout = 5 * time.Second

var dataTimeout atomic.Int64

func init() { dataTimeout.Store(int64(DefaultDataTimeout)) }

// SetDataTimeout sets how long a connection may go without the data of
// its R2Ts or without reading its responses (tcp.data_timeout_seconds).
func SetDataTimeout(d time.Duration) { dataTimeout.Store(int64(d)) }

// DataTimeout is the data timeout in force.
func DataTimeout() time.Duration { return time.Duration(dataTimeout.Load()) }

var epoch = time.Now()

// monotonic is nanoseconds on the monotonic clock.
func monotonic() int64 { return int64(time.Since(epoch)) }

// stallWatch watches one kind of progress: while the connection waits for
// it (active), the progress count must move within the data timeout. The
// clock is read only on a check that finds the count where it was: a
// connection whose count moves each pass reads none.
type stallWatch struct {
	on    bool
	timed bool   // since is set: the count has not moved since
	since int64  // monotonic time the count was first seen not to move
	mark  uint64 // the count then
}

// stalled reports whether the wait has lasted the timeout without the
// count moving.
func (w *stallWatch) stalled(active bool, count uint64, timeout int64) bool {
	switch {
	case !active:
		w.on = false
	case !w.on || count != w.mark:
		w.on, w.timed, w.mark = true, false, count
	case !w.timed:
		// It moved at the last check at the latest: the wait counts
		// from here, one pass later than it might.
		w.timed, w.since = true, monotonic()
	default:
		return monotonic()-w.since >= timeout
	}
	return false
}

// deadline is when the watch fires, if on; a count seen moving at the
// last check starts its wait at now.
func (w *stallWatch) deadline(now, timeout int64) (int64, bool) {
	if w.on && !w.timed {
		w.timed, w.since = true, now
	}
	return w.since + timeout, w.on
}

// stalls is a connection's two watches.
type stalls struct {
	r2tOut  int    // R2Ts whose data has not all come
	r2tDone uint64 // R2Ts whose data all came
	sent    uint64 // requests whose last PDU went out
	r2t, tx stallWatch
}

// watching reports whether the connection waits on its host.
func (c *Conn) watching() bool { return c.st.r2tOut > 0 || c.wantOut || c.st.r2t.on || c.st.tx.on }

// checkStalls closes the connection if it waited on its host for the data
// timeout without progress.
func (c *Conn) checkStalls() {
	timeout := dataTimeout.Load()
	var what string
	switch {
	case c.st.r2t.stalled(c.st.r2tOut > 0, c.st.r2tDone, timeout):
		what = "the host sent no R2T's data in full"
	case c.st.tx.stalled(c.wantOut, c.st.sent, timeout):
		what = "the host read no response in full"
	default:
		return
	}
	c.srv.stats.DataTimeouts.Add(1)
	c.srv.warn(warnDataTimeout, c.log.WithFields(logrus.Fields{"data_timeout": DataTimeout().String(), "r2ts": c.st.r2tOut}),
		what+" within the data timeout; closing the connection to give its buffers back")
	c.Disconnect()
}

// pollTimeout is poll(2)'s timeout in milliseconds: until the first
// watch fires, or -1.
func (c *Conn) pollTimeout() int {
	if !c.st.r2t.on && !c.st.tx.on {
		return -1
	}
	now, timeout := monotonic(), dataTimeout.Load()
	first, on := int64(0), false
	for _, w := range []*stallWatch{&c.st.r2t, &c.st.tx} {
		if d, ok := w.deadline(now, timeout); ok && (!on || d < first) {
			first, on = d, true
		}
	}
	return int(max(0, first-now)/int64(time.Millisecond)) + 1
}
