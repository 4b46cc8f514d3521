package backend

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// writeFile creates a regular file of n bytes whose first block is a pattern.
func writeFile(t *testing.T, path string, n int) {
	t.Helper()
	data := make([]byte, n)
	copy(data, bytes.Repeat([]byte{0xa5}, 512))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFileOpenSizes(t *testing.T) {
	cases := []struct {
		name      string
		existing  int // bytes of a pre-existing file; -1 for none
		opts      Options
		wantSize  int64
		wantBlock uint32
		wantFile  int64 // file size on disk afterwards
	}{
		{"create sparse", -1, Options{Size: 64 << 20}, 64 << 20, 512, 64 << 20},
		{"extend smaller file", 1 << 20, Options{Size: 8 << 20}, 8 << 20, 512, 8 << 20},
		{"larger file exports only size", 8 << 20, Options{Size: 4 << 20}, 4 << 20, 512, 8 << 20},
		{"size 0 takes the file's size", 3 << 20, Options{}, 3 << 20, 512, 3 << 20},
		{"rounds down to whole blocks", 1<<20 + 100, Options{BlockSize: 4096}, 1 << 20, 4096, 1<<20 + 100},
		{"odd size rounds down", -1, Options{Size: 1<<20 + 512, BlockSize: 4096}, 1 << 20, 4096, 1<<20 + 512},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A missing parent directory is created too.
			path := filepath.Join(t.TempDir(), "sub", "vol.img")
			if tc.existing >= 0 {
				os.Mkdir(filepath.Dir(path), 0o755)
				writeFile(t, path, tc.existing)
			}
			opts := tc.opts
			opts.Path, opts.Buffered = path, true
			b := mustOpen(t, "file", opts)
			if b.Size() != tc.wantSize || b.BlockSize() != tc.wantBlock {
				t.Fatalf("size %d block size %d, want %d and %d", b.Size(), b.BlockSize(), tc.wantSize, tc.wantBlock)
			}
			var st unix.Stat_t
			if err := unix.Stat(path, &st); err != nil {
				t.Fatal(err)
			}
			if st.Size != tc.wantFile {
				t.Fatalf("file is %d bytes, want %d", st.Size, tc.wantFile)
			}
			if tc.existing < 0 && st.Blocks*512 > 1<<20 {
				t.Fatalf("%d bytes allocated: created file is not sparse", st.Blocks*512)
			}
			if tc.existing > 0 {
				got := alignedBuf(t, 4096)
				if err := b.ReadAt(got[:512], 0); err != nil || !bytes.Equal(got[:512], bytes.Repeat([]byte{0xa5}, 512)) {
					t.Fatalf("existing data lost (err %v)", err)
				}
			}
		})
	}
}

// TestFileIO runs the same I/O checks with O_DIRECT (where the temporary
// directory's file system takes it) and through the page cache.
func TestFileIO(t *testing.T) {
	dir := t.TempDir()
	for _, buffered := range []bool{false, true} {
		name := map[bool]string{false: "direct", true: "buffered"}[buffered]
		t.Run(name, func(t *testing.T) {
			if !buffered && !directOK(dir) {
				t.Skipf("%s does not take O_DIRECT", dir)
			}
			testFileIO(t, Options{Path: filepath.Join(dir, name+".img"), Size: 16 << 20, Buffered: buffered})
		})
	}
}

// fileIO is one file backend under test, with a pattern to write and a
// buffer to read into.
type fileIO struct {
	outer *testing.T
	opts  Options
	b     Backend
	data  []byte
	got   []byte
}

func (f *fileIO) read(t *testing.T, off int64) []byte {
	t.Helper()
	clear(f.got)
	if err := f.b.ReadAt(f.got, off); err != nil {
		t.Fatal(err)
	}
	return f.got
}

func (f *fileIO) write(t *testing.T, off int64) {
	t.Helper()
	if err := f.b.WriteAt(f.data, off); err != nil {
		t.Fatal(err)
	}
}

// fileIOSteps run in order against one backend.
var fileIOSteps = []struct {
	name string
	run  func(f *fileIO, t *testing.T)
}{
	{"unwritten range reads zeros", func(f *fileIO, t *testing.T) {
		if !isZero(f.read(t, 8<<20)) {
			t.Fatal("sparse range has data")
		}
	}},
	{"read back what was written", func(f *fileIO, t *testing.T) {
		f.write(t, 1<<20)
		if !bytes.Equal(f.read(t, 1<<20), f.data) {
			t.Fatal("read back differs")
		}
	}},
	{"last block", func(f *fileIO, t *testing.T) {
		f.write(t, f.b.Size()-8192)
		if !bytes.Equal(f.read(t, f.b.Size()-8192), f.data) {
			t.Fatal("read back differs")
		}
	}},
	{"data kept across reopen", func(f *fileIO, t *testing.T) {
		if err := f.b.Flush(); err != nil {
			t.Fatal(err)
		}
		f.b.Close()
		f.b = mustOpen(f.outer, "file", f.opts)
		if !bytes.Equal(f.read(t, 1<<20), f.data) {
			t.Fatal("data lost on reopen")
		}
	}},
	{"discard reads back zeros", func(f *fileIO, t *testing.T) {
		f.write(t, 2<<20)
		if err := f.b.(Discarder).Discard(2<<20, 4096); err != nil {
			t.Fatal(err)
		}
		g := f.read(t, 2<<20)
		if !isZero(g[:4096]) || !bytes.Equal(g[4096:], f.data[4096:]) {
			t.Fatal("discard did not zero exactly its range")
		}
	}},
	{"write zeroes", func(f *fileIO, t *testing.T) {
		f.write(t, 3<<20)
		if err := f.b.(Zeroer).WriteZeroes(3<<20+4096, 4096); err != nil {
			t.Fatal(err)
		}
		g := f.read(t, 3<<20)
		if !bytes.Equal(g[:4096], f.data[:4096]) || !isZero(g[4096:]) {
			t.Fatal("write zeroes did not zero exactly its range")
		}
	}},
	{"write zeroes without fallocate", func(f *fileIO, t *testing.T) {
		f.write(t, 4<<20)
		// The last resort for file systems with neither zero range nor
		// punch hole, spanning more than one zero page.
		fb := f.b.(*fileBackend)
		if err := fb.writeZeroesSlow(4<<20, int64(len(zeroPage))+4096); err != nil {
			t.Fatal(err)
		}
		if !isZero(f.read(t, 4<<20)) || !isZero(f.read(t, 4<<20+int64(len(zeroPage))-4096)) {
			t.Fatal("range not zeroed")
		}
	}},
}

func testFileIO(outer *testing.T, opts Options) {
	f := &fileIO{outer: outer, opts: opts, b: mustOpen(outer, "file", opts),
		data: pattern(outer, 8192, 3), got: alignedBuf(outer, 8192)}
	for _, s := range fileIOSteps {
		outer.Run(s.name, func(t *testing.T) { s.run(f, t) })
	}
}

func TestFileReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ro.img")
	writeFile(t, path, 1<<20)
	b := mustOpen(t, "file", Options{Path: path, ReadOnly: true, Buffered: true})
	buf := alignedBuf(t, 4096)
	if err := b.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		do   func() error
	}{
		{"write", func() error { return b.WriteAt(buf, 0) }},
		{"discard", func() error { return b.(Discarder).Discard(0, 4096) }},
		{"write zeroes", func() error { return b.(Zeroer).WriteZeroes(0, 4096) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want ErrReadOnly naming %s", err, path)
			}
		})
	}
}

func TestFileOpenErrors(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.img")
	writeFile(t, small, 4096)
	empty := filepath.Join(dir, "empty.img")
	writeFile(t, empty, 0)
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"no path", Options{Size: 1 << 20}, "path is required"},
		{"missing without size", Options{Path: filepath.Join(dir, "none.img")}, "no size is set to create it"},
		{"empty without size", Options{Path: empty, Buffered: true}, "file is empty and no size is set"},
		{"smaller than a block", Options{Path: small, Size: 1000, BlockSize: 4096, Buffered: true}, "smaller than one 4096-byte block"},
		{"directory", Options{Path: dir, Size: 1 << 20}, "not a regular file"},
		{"read-only missing", Options{Path: filepath.Join(dir, "x.img"), Size: 1 << 20, ReadOnly: true}, "does not exist"},
		{"read-only too small", Options{Path: small, Size: 1 << 20, ReadOnly: true, Buffered: true}, "smaller than size"},
		{"parent is a file", Options{Path: filepath.Join(small, "vol.img"), Size: 1 << 20}, "not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open("file", tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.opts.Path != "" && !strings.Contains(err.Error(), tc.opts.Path) {
				t.Fatalf("error %v does not name the path", err)
			}
		})
	}
}

func TestDirectUnsupported(t *testing.T) {
	t.Run("explained", func(t *testing.T) {
		err := openError("/run/vol.img", true, &os.PathError{Op: "open", Path: "/run/vol.img", Err: unix.EINVAL})
		if !strings.Contains(err.Error(), "set buffered: true for this namespace") || !strings.Contains(err.Error(), "/run/vol.img") {
			t.Fatalf("error %v does not tell the operator to set buffered", err)
		}
	})
	t.Run("other errors wrapped", func(t *testing.T) {
		err := openError("/run/vol.img", false, &os.PathError{Op: "open", Path: "/run/vol.img", Err: unix.EACCES})
		if !errors.Is(err, unix.EACCES) {
			t.Fatalf("error %v does not wrap its cause", err)
		}
	})
	t.Run("tmpfs", func(t *testing.T) {
		dir := "/dev/shm"
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			t.Skipf("no %s to try O_DIRECT on", dir)
		}
		if directOK(dir) {
			t.Skipf("%s takes O_DIRECT (tmpfs does since Linux 6.6); the message is checked by the explained subtest", dir)
		}
		path := filepath.Join(dir, "nvmeof-tgt-direct-test.img")
		defer os.Remove(path)
		if _, err := Open("file", Options{Path: path, Size: 1 << 20}); err == nil || !strings.Contains(err.Error(), "buffered: true") {
			t.Fatalf("Open on %s: %v", dir, err)
		}
	})
}
