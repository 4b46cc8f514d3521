package tcp

import (
	"sync"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// Warnings a peer can cause are rate limited per port and kind: the first
// is logged, then at most one every warnEvery, with the number left out
// since. A stalled or hostile peer that reconnects in a loop would flood
// the log otherwise. The metrics count every event.

type warnKind uint8

const (
	warnConnectTimeout warnKind = iota
	warnDataTimeout
	warnFatal      // a fatal error of the host's PDUs
	warnTLSRefused // a connection in clear to a port that requires TLS
	warnTLSFailed  // a TLS handshake that failed
	numWarnKinds
)

const warnEvery = fabrics.LogEvery

type warnLimiter struct {
	mu    sync.Mutex
	kinds [numWarnKinds]fabrics.LogLimit
}

// allow reports whether a warning of kind may be logged at now, and how
// many were left out before it.
func (l *warnLimiter) allow(kind warnKind, now time.Time) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kinds[kind].Allow(now)
}

// warn logs msg at warning level unless a warning of kind was logged on
// the port within warnEvery.
func (s *server) warn(kind warnKind, log *logrus.Entry, msg string) {
	s.warns.mu.Lock()
	defer s.warns.mu.Unlock()
	s.warns.kinds[kind].Warn(time.Now(), log, msg)
}
