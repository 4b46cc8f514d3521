package backend

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// loopDevice attaches a new sparse file of size bytes to a free loop device
// with the given logical block size and returns the device's path. It skips
// the test where loop devices cannot be set up (no root, no loop driver).
func loopDevice(t *testing.T, size int64, blockSize uint32) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "loop.img")
	backing, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	defer backing.Close()
	if err := backing.Truncate(size); err != nil {
		t.Fatal(err)
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no loop devices to test the block backend on: %v", err)
	}
	defer ctl.Close()
	// Another program may take the free device first: try again.
	for range 5 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			t.Skipf("no free loop device: %v", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		loop, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			t.Skipf("cannot open %s: %v", dev, err)
		}
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &unix.LoopConfig{
			Fd: uint32(backing.Fd()), Size: blockSize,
			Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR},
		})
		if errors.Is(err, unix.EBUSY) {
			loop.Close()
			continue
		}
		if err != nil {
			loop.Close()
			t.Skipf("cannot attach %s: %v", dev, err)
		}
		// Autoclear detaches the device once the test's last descriptor
		// to it is closed.
		t.Cleanup(func() { loop.Close() })
		return dev
	}
	t.Skip("every free loop device was taken by another program")
	return ""
}

func TestBlock(t *testing.T) {
	dev := loopDevice(t, 16<<20, 4096)
	if _, err := Open("block", Options{Path: dev, BlockSize: 512}); err == nil || !strings.Contains(err.Error(), "differs from the device's logical block size 4096") {
		t.Fatalf("block_size 512 on a 4096-byte device: %v", err)
	}
	b := mustOpen(t, "block", Options{Path: dev})
	if b.Size() != 16<<20 || b.BlockSize() != 4096 {
		t.Fatalf("size %d block size %d, want 16 MiB and 4096", b.Size(), b.BlockSize())
	}
	if _, err := Open("block", Options{Path: dev}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second exclusive open: %v", err)
	}
	data := pattern(t, 8192, 5)
	got := alignedBuf(t, 8192)
	steps := []struct {
		name string
		run  func() error
		want []byte // what reads back at 1 MiB afterwards
	}{
		{"read back what was written", func() error { return b.WriteAt(data, 1<<20) }, data},
		{"flush", b.Flush, data},
		{"write zeroes", func() error { return b.(Zeroer).WriteZeroes(1<<20, 4096) }, append(make([]byte, 4096), data[4096:]...)},
		{"discard", func() error { return b.(Discarder).Discard(1<<20, 8192) }, make([]byte, 8192)},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := s.run(); err != nil {
				t.Fatal(err)
			}
			if err := b.ReadAt(got, 1<<20); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, s.want) {
				t.Fatal("device holds something else")
			}
		})
	}
}

func TestBlockReadOnly(t *testing.T) {
	dev := loopDevice(t, 1<<20, 512)
	b := mustOpen(t, "block", Options{Path: dev, ReadOnly: true})
	buf := alignedBuf(t, 4096)
	if err := b.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"write":        b.WriteAt(buf, 0),
		"discard":      b.(Discarder).Discard(0, 4096),
		"write zeroes": b.(Zeroer).WriteZeroes(0, 4096),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: %v, want ErrReadOnly", name, err)
		}
	}
}

func TestBlockNotADevice(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vol.img")
	writeFile(t, file, 4096)
	cases := []struct {
		name string
		path string
		want string
	}{
		{"regular file", file, "not a block device"},
		{"character device", "/dev/null", "not a block device"},
		{"missing", file + ".missing", "no such file"},
		{"no path", "", "path is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open("block", Options{Path: tc.path})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("error %v, want %q naming %q", err, tc.want, tc.path)
			}
		})
	}
}
