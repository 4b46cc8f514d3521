package fabrics

import (
	"os"
	"strconv"
	"time"
)

// The pollers of both transports spin briefly before they sleep, but only
// while a host streams commands: Spin is what they share.

// SpinWindow is how long a poller keeps polling an idle queue before it
// sleeps, given the window its transport chose (d): long enough to catch a
// host's next command at queue depth 1 without a wake-up, short enough
// that an idle target burns no CPU. NVMEOF_TGT_SPIN_US, for tuning,
// replaces every transport's; 0 turns spinning off.
func SpinWindow(d time.Duration) time.Duration {
	if spinOverride >= 0 {
		return spinOverride
	}
	return d
}

// spinOverride is NVMEOF_TGT_SPIN_US; -1 when unset.
var spinOverride = func() time.Duration {
	if n, err := strconv.Atoi(os.Getenv("NVMEOF_TGT_SPIN_US")); err == nil && n >= 0 {
		return time.Duration(n) * time.Microsecond
	}
	return -1
}()

// SpinGap is the longest sleep after which a poller still spins: a host
// whose next command came this soon is streaming I/O, and spinning saves
// its next commands a wake-up. After a longer sleep (an idle queue woken
// by a keep-alive, an admin command) the poller goes back to sleep as soon
// as its work is done, so an idle target costs next to nothing.
const SpinGap = time.Millisecond

// Spin decides when an idle poller sleeps. A poller calls Worked after a
// pass that did something, Idle after one that did nothing (sleep when it
// says so), and Slept with how long its last sleep lasted.
type Spin struct {
	Window time.Duration // SpinWindow's; 0: never spin

	on        bool      // the last sleep was short: spin before the next
	park      bool      // the last sleep was long: park for the next (Parker)
	idleSince time.Time // the first idle pass of this spin; zero: none yet
	empty     int       // idle passes since the last clock read
}

// Worked ends the idle count.
func (s *Spin) Worked() { s.idleSince, s.empty = time.Time{}, 0 }

// Idle reports whether the poller should sleep now.
func (s *Spin) Idle() (sleep bool) {
	if !s.on {
		return true
	}
	// The clock is read every 8th idle pass: in a virtual machine
	// without a usable TSC a clock read is a system call, dearer than the
	// pass.
	if s.empty++; s.empty&7 != 0 {
		return false
	}
	now := time.Now()
	if s.idleSince.IsZero() {
		s.idleSince = now
		return false
	}
	if now.Sub(s.idleSince) < s.Window {
		return false
	}
	s.idleSince = time.Time{}
	return true
}

// Slept takes the length of the sleep that just ended: a short one means
// a streaming host, and the next idle time is spun; a long one, an idle
// queue, whose poller parks for its next sleep.
func (s *Spin) Slept(d time.Duration) {
	s.on = s.Window > 0 && d < SpinGap
	s.park = d >= ParkAfter
}

// Parks reports whether the poller's next sleep should be a Parker's: its
// last one lasted ParkAfter or more.
func (s *Spin) Parks() bool { return s.park }
