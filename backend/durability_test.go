package backend

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

func TestWriteAtSyncStoresData(t *testing.T) {
	for _, buffered := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "vol.img")
		b, err := Open("file", Options{Path: path, Size: 1 << 20, Buffered: buffered})
		if err != nil {
			if !buffered {
				t.Logf("O_DIRECT not available here (%v); buffered case only", err)
				continue
			}
			t.Fatal(err)
		}
		buf := alignedBuf(t, 8192)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		sw, ok := b.(SyncWriter)
		if !ok {
			t.Fatal("file backend does not implement SyncWriter: FUA writes would need a flush each")
		}
		if err := sw.WriteAtSync(buf, 4096); err != nil {
			t.Fatalf("buffered=%v: WriteAtSync: %v", buffered, err)
		}
		got := alignedBuf(t, 8192)
		if err := b.ReadAt(got, 4096); err != nil || !bytes.Equal(got, buf) {
			t.Fatalf("buffered=%v: read back %v, data equal %v", buffered, err, bytes.Equal(got, buf))
		}
		b.Close()
	}
}

func TestWriteAtSyncReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vol.img")
	writeFile(t, path, 1<<20)
	b := mustOpen(t, "file", Options{Path: path, ReadOnly: true, Buffered: true})
	err := b.(SyncWriter).WriteAtSync(make([]byte, 512), 0)
	if !errors.Is(err, ErrReadOnly) {
		t.Fatalf("WriteAtSync on a read-only namespace: %v, want ErrReadOnly", err)
	}
}

// flushCounter is a backend without SyncWriter: WriteDurable must flush.
type flushCounter struct {
	Backend
	writes, flushes int
}

func (f *flushCounter) WriteAt(p []byte, off int64) error { f.writes++; return nil }
func (f *flushCounter) Flush() error                      { f.flushes++; return nil }

func TestWriteDurableFallsBackToFlush(t *testing.T) {
	f := &flushCounter{}
	if err := WriteDurable(f, make([]byte, 512), 0); err != nil {
		t.Fatal(err)
	}
	if f.writes != 1 || f.flushes != 1 {
		t.Fatalf("writes %d flushes %d, want 1 and 1", f.writes, f.flushes)
	}
}

func TestTraits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vol.img")
	file := mustOpen(t, "file", Options{Path: path, Size: 1 << 20, Buffered: true})
	null := mustOpen(t, "nullblk", Options{Size: 1 << 20})
	cases := []struct {
		name string
		b    Backend
		want Traits
	}{
		{"file", file, Traits{VolatileCache: true, DiscardZeroes: true}},
		{"nullblk", null, Traits{VolatileCache: false, DiscardZeroes: true}},
		{"unknown backend", &flushCounter{}, Traits{VolatileCache: true, DiscardZeroes: false}},
	}
	for _, tc := range cases {
		if got := TraitsOf(tc.b); got != tc.want {
			t.Errorf("%s: traits %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestDirectAlignmentOfTempDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vol.img")
	b := mustOpen(t, "file", Options{Path: path, Size: 1 << 20, Buffered: true})
	a := directAlignment(b.(*fileBackend).fd)
	// 0 is allowed (no block device behind the file system); anything
	// else is a power of two the kernel reported.
	if a != 0 && (a < 512 || a&(a-1) != 0) {
		t.Fatalf("directAlignment = %d, want 0 or a power of two ≥ 512", a)
	}
	t.Logf("O_DIRECT alignment of %s: %d", filepath.Dir(path), a)
}
