package fabrics

import (
	"testing"
	"time"
)

// ManualClock fires a timer when the clock reaches it, not before, in
// deadline order, including timers that firing ones start; a stopped
// timer never fires.
func TestManualClock(t *testing.T) {
	var clk ManualClock
	var fired []string
	clk.AfterFunc(2*time.Second, func() { fired = append(fired, "b") })
	clk.AfterFunc(time.Second, func() {
		fired = append(fired, "a")
		clk.AfterFunc(500*time.Millisecond, func() { fired = append(fired, "a+") })
	})
	stopped := clk.AfterFunc(time.Second, func() { fired = append(fired, "stopped") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must report true once, for a timer not yet fired")
	}
	clk.Advance(time.Second - time.Nanosecond)
	if len(fired) != 0 {
		t.Fatalf("fired %v before any timer was due", fired)
	}
	clk.Advance(2 * time.Second)
	if got := len(fired); got != 3 || fired[0] != "a" || fired[1] != "a+" || fired[2] != "b" {
		t.Fatalf("fired %v, want [a a+ b]", fired)
	}
	if clk.Pending() != 0 || clk.Armed() != 4 {
		t.Fatalf("pending %d, armed %d; want 0 and 4", clk.Pending(), clk.Armed())
	}
}
