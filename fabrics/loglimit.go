package fabrics

import "time"

// LogLimit lets one log line through per period and counts the rest,
// which the next line reports: a peer that retries in a loop would
// otherwise flood the log. Not safe for concurrent use: its owner locks.
type LogLimit struct {
	Every      time.Duration
	last       time.Time
	suppressed uint64
}

// Allow reports whether a line may be logged at now, and how many were
// left out since the last one.
func (l *LogLimit) Allow(now time.Time) (suppressed uint64, ok bool) {
	if !l.last.IsZero() && now.Sub(l.last) < l.Every {
		l.suppressed++
		return 0, false
	}
	suppressed, l.suppressed, l.last = l.suppressed, 0, now
	return suppressed, true
}
