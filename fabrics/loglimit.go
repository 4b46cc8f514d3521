package fabrics

import (
	"time"

	"github.com/sirupsen/logrus"
)

// LogEvery spaces the warnings a peer can cause (refused queue pairs,
// timeouts, protocol errors): a peer that retries in a loop would
// otherwise flood the log.
const LogEvery = 10 * time.Second

// LogLimit lets one log line through per period (Every, or LogEvery when
// zero) and counts the rest, which the next line reports. Not safe for
// concurrent use: its owner locks.
type LogLimit struct {
	Every      time.Duration
	last       time.Time
	suppressed uint64
}

// Allow reports whether a line may be logged at now, and how many were
// left out since the last one.
func (l *LogLimit) Allow(now time.Time) (suppressed uint64, ok bool) {
	every := l.Every
	if every == 0 {
		every = LogEvery
	}
	if !l.last.IsZero() && now.Sub(l.last) < every {
		l.suppressed++
		return 0, false
	}
	suppressed, l.suppressed, l.last = l.suppressed, 0, now
	return suppressed, true
}

// Warn logs msg on log at warning level if Allow lets it through at now,
// with the number left out before it ("suppressed").
func (l *LogLimit) Warn(now time.Time, log *logrus.Entry, msg string) {
	n, ok := l.Allow(now)
	if !ok {
		return
	}
	if n > 0 {
		log = log.WithField("suppressed", n)
	}
	log.Warn(msg)
}
