package fabrics

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParkAfterALongSleepOnly(t *testing.T) {
	var s Spin
	s.Slept(ParkAfter - time.Microsecond)
	if s.Parks() {
		t.Errorf("parks after a sleep of %v, shorter than ParkAfter", ParkAfter-time.Microsecond)
	}
	s.Slept(ParkAfter)
	if !s.Parks() {
		t.Errorf("does not park after a sleep of ParkAfter")
	}
	s.Slept(time.Microsecond)
	if s.Parks() {
		t.Errorf("still parks after a short sleep: a streaming host's poller would pay the hand-over")
	}
}

func eventfd(t *testing.T) int {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestParkerWakesOnEitherDescriptor(t *testing.T) {
	a, b := eventfd(t), eventfd(t)
	p, err := NewParker(a, b)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, fd := range []int{a, b} {
		done := make(chan error, 1)
		go func() { done <- p.Park() }()
		if _, err := unix.Write(fd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Park after a write to descriptor %d: %v", fd, err)
		}
		var buf [8]byte
		unix.Read(fd, buf[:]) // level-triggered: consume, or the next Park returns at once
	}
}

func TestParkerCloseEndsAPark(t *testing.T) {
	p, err := NewParker(eventfd(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Park() }()
	p.Close()
	if err := <-done; err == nil {
		t.Fatal("Park returned no error after Close")
	}
}

func TestParkAllocatesNothing(t *testing.T) {
	fd := eventfd(t)
	p, err := NewParker(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	unix.Write(fd, []byte{1, 0, 0, 0, 0, 0, 0, 0}) // readable: every Park returns at once
	runtime.LockOSThread()                         // as a poller is
	defer runtime.UnlockOSThread()
	if n := testing.AllocsPerRun(100, func() { p.Park() }); n != 0 {
		t.Errorf("Park allocates %v times", n)
	}
}

func TestNewParkerRefusesABadDescriptor(t *testing.T) {
	if p, err := NewParker(-1); err == nil {
		p.Close()
		t.Fatal("a parker on descriptor -1")
	}
}

// threads is the process's count of threads.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}

// Parked pollers hold no thread: a thousand idle connections do not keep
// a thousand threads, and the thread that finds a parked poller ready
// runs it, with no hand-over to the poller's own. Pinned ones
// (KeepThread) keep theirs.
func TestParkedPollersHoldNoThread(t *testing.T) {
	const pollers = 64
	for _, keep := range []bool{false, true} {
		before := threads(t)
		var parking atomic.Int32
		fds := make([]int, pollers)
		done := make(chan error, pollers)
		for i := range fds {
			fds[i] = eventfd(t)
			p, err := NewParker(fds[i])
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.KeepThread = keep
			go func() {
				// Returns locked, as a poller does: its thread exits with
				// it, so the next round starts with no idle ones.
				runtime.LockOSThread()
				parking.Add(1)
				done <- p.Park()
			}()
			for parking.Load() <= int32(i) {
				runtime.Gosched()
			}
		}
		grew := threads(t) - before
		for _, fd := range fds {
			unix.Write(fd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		}
		for range fds {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("KeepThread %v: %d pollers parked, %d more threads", keep, pollers, grew)
		if !keep && grew > pollers/4 {
			t.Errorf("%d parked pollers made %d more threads: parked, they still hold their threads", pollers, grew)
		}
		if keep && grew < pollers*3/4 {
			t.Errorf("%d parked pollers with KeepThread made only %d more threads: the test measures nothing", pollers, grew)
		}
	}
}
