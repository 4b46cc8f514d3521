package fabrics

import (
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
