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

// alignedBuf returns page-aligned memory, as registered buffers are.
func alignedBuf(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// directOK reports whether dir's file system takes O_DIRECT.
func directOK(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, ".direct-probe"), os.O_CREATE|os.O_RDWR|unix.O_DIRECT, 0o644)
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(filepath.Join(dir, ".direct-probe"))
	return true
}

func TestFileCreateSparseAndPersist(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "vol.img")
	buffered := !directOK(dir)
	b, err := Open("file", Options{Path: path, Size: 64 << 20, BlockSize: 512, Buffered: buffered})
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 64<<20 || st.Blocks*512 > 1<<20 {
		t.Fatalf("size %d, %d bytes allocated: want 64 MiB sparse", st.Size, st.Blocks*512)
	}
	buf := alignedBuf(t, 8192)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	if err := b.WriteAt(buf, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// Reopened with a larger size: extended, data kept.
	b, err = Open("file", Options{Path: path, Size: 128 << 20, BlockSize: 4096, Buffered: buffered})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Size() != 128<<20 || b.BlockSize() != 4096 {
		t.Fatalf("size %d block size %d", b.Size(), b.BlockSize())
	}
	got := alignedBuf(t, 8192)
	if err := b.ReadAt(got, 1<<20); err != nil || !bytes.Equal(got, buf) {
		t.Fatalf("read back differs (err %v)", err)
	}
	// Discard and write zeroes read back as zeros.
	if err := b.(Discarder).Discard(1<<20, 4096); err != nil {
		t.Fatal(err)
	}
	if err := b.(Zeroer).WriteZeroes(1<<20+4096, 4096); err != nil {
		t.Fatal(err)
	}
	if err := b.ReadAt(got, 1<<20); err != nil || !bytes.Equal(got, make([]byte, 8192)) {
		t.Fatalf("discarded range not zero (err %v)", err)
	}
}

func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "ro.img")
	os.WriteFile(existing, make([]byte, 4096), 0o644)
	cases := []struct {
		name string
		kind string
		opts Options
		want string
	}{
		{"no path", "file", Options{Size: 1 << 20}, "path is required"},
		{"missing without size", "file", Options{Path: filepath.Join(dir, "none.img"), Buffered: true}, "no size"},
		{"directory", "file", Options{Path: dir, Size: 1 << 20}, "not a regular file"},
		{"read-only missing", "file", Options{Path: filepath.Join(dir, "x.img"), Size: 1 << 20, ReadOnly: true}, "does not exist"},
		{"nullblk without size", "nullblk", Options{}, "size is required"},
		{"block on a file", "block", Options{Path: existing}, "not a block device"},
		{"unknown kind", "flie", Options{}, "unknown backend"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.kind, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Open("flie", Options{}); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown backend error does not wrap ErrUnknown: %v", err)
	}
}

func TestFileReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ro.img")
	os.WriteFile(path, make([]byte, 1<<20), 0o644)
	b, err := Open("file", Options{Path: path, ReadOnly: true, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Size() != 1<<20 {
		t.Fatalf("size %d", b.Size())
	}
	if err := b.WriteAt(make([]byte, 512), 0); err == nil {
		t.Fatal("write to a read-only backend succeeded")
	}
}

func TestDirectUnsupportedIsExplained(t *testing.T) {
	err := openError("/run/vol.img", true, &os.PathError{Op: "open", Path: "/run/vol.img", Err: unix.EINVAL})
	if !strings.Contains(err.Error(), "buffered: true") {
		t.Fatalf("error %v does not tell the operator to set buffered", err)
	}
	err = openError("/run/vol.img", false, &os.PathError{Op: "open", Path: "/run/vol.img", Err: unix.EACCES})
	if !errors.Is(err, unix.EACCES) {
		t.Fatalf("error %v does not wrap its cause", err)
	}
	// Where the file system really lacks O_DIRECT, Open says the same.
	if dir := "/dev/shm"; !directOK(dir) {
		path := filepath.Join(dir, "nvmeof-tgt-direct-test.img")
		defer os.Remove(path)
		if _, err := Open("file", Options{Path: path, Size: 1 << 20}); err == nil || !strings.Contains(err.Error(), "buffered: true") {
			t.Fatalf("Open on %s: %v", dir, err)
		}
	}
}

func TestNullblk(t *testing.T) {
	b, err := Open("nullblk", Options{Size: 1 << 30, BlockSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte{1}, 4096)
	if err := b.WriteAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, make([]byte, 4096)) {
		t.Fatal("nullblk read returned data")
	}
	if nb, ok := b.(NonBlocking); !ok || !nb.NonBlocking() {
		t.Fatal("nullblk is not marked non-blocking")
	}
	if b.Size() != 1<<30 || b.BlockSize() != 4096 {
		t.Fatalf("size %d block size %d", b.Size(), b.BlockSize())
	}
}

func BenchmarkFileReadAt(b *testing.B) {
	dir := b.TempDir()
	f, err := Open("file", Options{Path: filepath.Join(dir, "bench.img"), Size: 64 << 20, Buffered: !directOK(dir)})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuf(b, 4096)
	f.WriteAt(buf, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f.ReadAt(buf, int64(i%1024)*4096); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFileWriteAt(b *testing.B) {
	dir := b.TempDir()
	f, err := Open("file", Options{Path: filepath.Join(dir, "bench.img"), Size: 64 << 20, Buffered: !directOK(dir)})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuf(b, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f.WriteAt(buf, int64(i%1024)*4096); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNullblkRead(b *testing.B) {
	f, _ := Open("nullblk", Options{Size: 1 << 30})
	buf := alignedBuf(b, 4096)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f.ReadAt(buf, 0)
	}
}
