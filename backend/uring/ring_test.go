package uring

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newRing sets up a ring, or fails the test: the machines the tests run on
// have io_uring, and a silent skip would hide the binding breaking.
func newRing(t testing.TB, entries uint32) *Ring {
	t.Helper()
	r, err := New(entries)
	if err != nil {
		t.Fatalf("New(%d): %v", entries, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func tempFile(t testing.TB, size int64) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// wait submits and returns the next completion, within a deadline.
func wait(t testing.TB, r *Ring) (uint64, int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if tag, res, ok := r.Peek(); ok {
			r.Advance()
			return tag, res
		}
		if err := r.SubmitAndWait(); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("no completion within 10s")
	return 0, 0
}

func TestWriteReadFsync(t *testing.T) {
	r := newRing(t, 8)
	f := tempFile(t, 1<<20)
	fd := int(f.Fd())
	data := bytes.Repeat([]byte("nvme"), 1024)
	if !r.PrepWrite(fd, data, 8192, 0, 1) {
		t.Fatal("PrepWrite on an empty ring reported full")
	}
	if tag, res := wait(t, r); tag != 1 || res != int32(len(data)) {
		t.Fatalf("write: tag %d res %d, want 1 %d", tag, res, len(data))
	}
	if !r.PrepWrite(fd, data[:512], 0, unix.RWF_DSYNC, 2) {
		t.Fatal("PrepWrite full")
	}
	if tag, res := wait(t, r); tag != 2 || res != 512 {
		t.Fatalf("DSYNC write: tag %d res %d, want 2 512", tag, res)
	}
	if !r.PrepFdatasync(fd, 3) {
		t.Fatal("PrepFdatasync full")
	}
	if tag, res := wait(t, r); tag != 3 || res != 0 {
		t.Fatalf("fdatasync: tag %d res %d, want 3 0", tag, res)
	}
	got := make([]byte, len(data))
	if !r.PrepRead(fd, got, 8192, 4) {
		t.Fatal("PrepRead full")
	}
	if tag, res := wait(t, r); tag != 4 || res != int32(len(got)) {
		t.Fatalf("read: tag %d res %d", tag, res)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("read back differs from what was written")
	}
	if r.Ready() {
		t.Fatal("Ready with every completion consumed")
	}
}

// A read that crosses the end of the file comes back short; the caller
// resubmits the rest, which then reads 0 bytes (end of file).
func TestShortRead(t *testing.T) {
	r := newRing(t, 4)
	f := tempFile(t, 6000)
	buf := make([]byte, 8192)
	r.PrepRead(int(f.Fd()), buf, 0, 7)
	if _, res := wait(t, r); res != 6000 {
		t.Fatalf("res %d, want 6000", res)
	}
	r.PrepRead(int(f.Fd()), buf[6000:], 6000, 8)
	if _, res := wait(t, r); res != 0 {
		t.Fatalf("past the end: res %d, want 0", res)
	}
}

func TestErrors(t *testing.T) {
	r := newRing(t, 4)
	buf := make([]byte, 512)
	ro, err := os.Open(tempFile(t, 4096).Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	cases := []struct {
		name string
		prep func() bool
		want unix.Errno
	}{
		{"read from a bad descriptor", func() bool { return r.PrepRead(1<<20, buf, 0, 1) }, unix.EBADF},
		{"write to a read-only descriptor", func() bool { return r.PrepWrite(int(ro.Fd()), buf, 0, 0, 2) }, unix.EBADF},
		{"fdatasync of a bad descriptor", func() bool { return r.PrepFdatasync(-1, 3) }, unix.EBADF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !c.prep() {
				t.Fatal("queue full")
			}
			_, res := wait(t, r)
			if !errors.Is(Errno(res), c.want) {
				t.Fatalf("res %d (%v), want %v", res, Errno(res), c.want)
			}
		})
	}
}

// A full submission queue refuses more entries until the kernel took them.
func TestRingFull(t *testing.T) {
	r := newRing(t, 4)
	f := tempFile(t, 1<<16)
	buf := make([]byte, 512)
	n := 0
	for r.PrepRead(int(f.Fd()), buf, 0, uint64(n)) {
		n++
		if n > 64 {
			t.Fatal("the queue never filled")
		}
	}
	if n != int(r.Entries()) || r.Unsubmitted() != r.Entries() {
		t.Fatalf("queued %d (unsubmitted %d), want %d", n, r.Unsubmitted(), r.Entries())
	}
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if r.Unsubmitted() != 0 || !r.PrepRead(int(f.Fd()), buf, 0, 99) {
		t.Fatal("the queue stayed full after Submit")
	}
	for range n + 1 {
		wait(t, r)
	}
}

// Completions write the registered eventfd, which is what wakes a
// sleeping poller.
func TestEventFD(t *testing.T) {
	r := newRing(t, 4)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := r.RegisterEventFD(efd); err != nil {
		t.Fatal(err)
	}
	f := tempFile(t, 4096)
	r.PrepRead(int(f.Fd()), make([]byte, 512), 0, 1)
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 10_000); err != nil || n != 1 {
		t.Fatalf("poll on the eventfd: %d %v, want it readable", n, err)
	}
	if _, res := wait(t, r); res != 512 {
		t.Fatalf("res %d", res)
	}
}

func TestProbe(t *testing.T) {
	if err := Probe(); err != nil {
		t.Fatalf("Probe: %v", err)
	}
}

// BenchmarkReadSubmitComplete is the per-I/O path of a queue: prepare,
// submit, reap. It must not allocate.
func BenchmarkReadSubmitComplete(b *testing.B) {
	r := newRing(b, 32)
	f := tempFile(b, 1<<20)
	buf := make([]byte, 4096)
	fd := int(f.Fd())
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.PrepRead(fd, buf, int64(i%256)*4096, uint64(i))
		if err := r.SubmitAndWait(); err != nil {
			b.Fatal(err)
		}
		for {
			_, res, ok := r.Peek()
			if !ok {
				break
			}
			if res != 4096 {
				b.Fatalf("res %d", res)
			}
			r.Advance()
		}
	}
}

// Unqueue takes back what was queued and not submitted, in order, and
// leaves what the kernel took alone.
func TestUnqueue(t *testing.T) {
	r := newRing(t, 8)
	f := tempFile(t, 4096)
	buf := make([]byte, 512)
	r.PrepRead(int(f.Fd()), buf, 0, 1)
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	r.PrepRead(int(f.Fd()), buf, 0, 2)
	r.PrepFdatasync(int(f.Fd()), 3)
	var tags []uint64
	r.Unqueue(func(tag uint64) { tags = append(tags, tag) })
	if len(tags) != 2 || tags[0] != 2 || tags[1] != 3 || r.Unsubmitted() != 0 {
		t.Fatalf("unqueued %v, %d left; want [2 3] and none", tags, r.Unsubmitted())
	}
	if tag, res := wait(t, r); tag != 1 || res != 512 {
		t.Fatalf("completion tag %d res %d, want the submitted read", tag, res)
	}
	if err := r.Submit(); err != nil || r.Ready() {
		t.Fatalf("after Unqueue a Submit ran something: %v, ready %v", err, r.Ready())
	}
}
