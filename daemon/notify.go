package daemon

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// notifier speaks systemd's service notification protocol (sd_notify(3)):
// newline-separated KEY=VALUE assignments, one datagram per message, sent
// to the unix datagram socket named by $NOTIFY_SOCKET. Outside systemd
// (no NOTIFY_SOCKET) every method does nothing, so callers need not care.
//
// The messages nvmeof-tgt sends, in the order systemd expects them:
// READY=1 once every port listens and every namespace is open;
// RELOADING=1 with MONOTONIC_USEC when a reload starts, READY=1 when it
// ends (accepted or not); STATUS= whenever the summary line changes;
// WATCHDOG=1 from the main loop; STOPPING=1 at shutdown.
type notifier struct {
	conn  *net.UnixConn // nil: not started by systemd
	clock func() time.Duration
	log   *logrus.Entry

	mu     sync.Mutex // orders messages from the main loop and the admin socket
	ready  bool       // READY=1 was sent: reloads may announce themselves
	status string     // the STATUS= line systemd has
	failed bool       // a send failed and was logged
	// stopped: STOPPING=1 was sent. An admin reload still finishing must
	// not tell systemd the service is reloading or ready again.
	stopped bool
}

// newNotifier connects to $NOTIFY_SOCKET as getenv reports it. An unset
// variable gives a notifier that sends nothing. Paths start with '/', or
// with '@' for Linux's abstract namespace (Go maps '@' to the leading NUL).
// clock reads CLOCK_MONOTONIC, the time base of MONOTONIC_USEC.
func newNotifier(getenv func(string) string, clock func() time.Duration, log *logrus.Entry) (*notifier, error) {
	n := &notifier{clock: clock, log: log}
	path := getenv("NOTIFY_SOCKET")
	if path == "" {
		return n, nil
	}
	if !strings.HasPrefix(path, "/") && !strings.HasPrefix(path, "@") {
		return n, fmt.Errorf("NOTIFY_SOCKET=%q: not a socket path (must start with / or @); systemd will not hear from the daemon", path)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return n, fmt.Errorf("NOTIFY_SOCKET=%s: %w; systemd will not hear from the daemon", path, err)
	}
	n.conn = conn
	return n, nil
}

// monotonic reads CLOCK_MONOTONIC, the clock systemd compares
// MONOTONIC_USEC against.
func monotonic() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("CLOCK_MONOTONIC: " + err.Error()) // Linux always has it
	}
	return time.Duration(ts.Nano())
}

// watchdogTimeout reports the timeout systemd enforces (WatchdogSec=, as
// WATCHDOG_USEC), or 0 when the unit sets none or the variables are meant
// for another process (WATCHDOG_PID names a different pid).
func watchdogTimeout(getenv func(string) string, pid int) time.Duration {
	usec, err := strconv.ParseUint(getenv("WATCHDOG_USEC"), 10, 63)
	if err != nil || usec == 0 {
		return 0
	}
	if p := getenv("WATCHDOG_PID"); p != "" && p != strconv.Itoa(pid) {
		return 0
	}
	return time.Duration(usec) * time.Microsecond
}

// send writes one message; n.mu is held. The first failure is logged;
// systemd being gone is no reason for the target to stop serving.
func (n *notifier) send(lines ...string) {
	if n.conn == nil || n.stopped {
		return
	}
	if _, err := n.conn.Write([]byte(strings.Join(lines, "\n"))); err != nil && !n.failed {
		n.failed = true
		n.log.WithError(err).Warn("cannot notify systemd (NOTIFY_SOCKET); the unit may time out or be restarted by its watchdog")
	}
}

// statusLine returns STATUS=line if systemd does not have it yet.
func (n *notifier) statusLine(line string) []string {
	if line == "" || line == n.status {
		return nil
	}
	n.status = line
	return []string{"STATUS=" + line}
}

// readyNow tells systemd the service is up (first time) or that a reload
// ended, with the status line if it changed.
func (n *notifier) readyNow(status string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ready = true
	n.send(append([]string{"READY=1"}, n.statusLine(status)...)...)
}

// reloading tells systemd a reload started. MONOTONIC_USEC is what
// systemd 253 and later require with RELOADING=1 (it tells this reload
// from an earlier one); systemd 252 ignores it. Before READY=1 there is
// nothing to reload from, so it says nothing; the reload's closing
// readyNow is then the first READY=1.
func (n *notifier) reloading() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.ready {
		return
	}
	n.send("RELOADING=1", fmt.Sprintf("MONOTONIC_USEC=%d", n.clock().Microseconds()))
}

// setStatus updates the STATUS= line `systemctl status` shows.
func (n *notifier) setStatus(line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.statusLine(line); s != nil {
		n.send(s...)
	}
}

// watchdog pings systemd's watchdog.
func (n *notifier) watchdog() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.send("WATCHDOG=1")
}

// stopping tells systemd the shutdown started.
func (n *notifier) stopping() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.send("STOPPING=1")
	n.stopped = true
}

func (n *notifier) close() {
	if n.conn != nil {
		n.conn.Close()
	}
}
