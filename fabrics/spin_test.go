package fabrics

import (
	"testing"
	"time"
)

// A poller spins only after a short sleep, and only for SpinWindow: a
// host that stops sending leaves it asleep, whatever it did before.
func TestSpinOnlyWhileTheHostStreams(t *testing.T) {
	s := Spin{Window: 200 * time.Microsecond}
	if !s.Idle() {
		t.Fatal("spinning before any sleep")
	}
	s.Slept(10 * time.Millisecond) // an idle queue woken
	if !s.Idle() {
		t.Fatal("spinning after a long sleep")
	}
	s.Slept(50 * time.Microsecond) // the host's next command came at once
	start := time.Now()
	passes := 0
	for !s.Idle() {
		passes++
		if time.Since(start) > s.Window+50*time.Millisecond {
			t.Fatalf("still spinning %v after the window of %v", time.Since(start), s.Window)
		}
	}
	if d := time.Since(start); d < s.Window {
		t.Fatalf("slept after %v of spinning (%d passes), before the window of %v", d, passes, s.Window)
	}
	// Work found while spinning starts the window again.
	s.Worked()
	if s.Idle() {
		t.Fatal("asleep right after work, while spinning")
	}
}

func TestNoWindowNoSpin(t *testing.T) {
	var s Spin
	s.Slept(time.Microsecond)
	if !s.Idle() {
		t.Fatal("spinning without a window")
	}
}
