package backend

import (
	"path/filepath"
	"testing"
)

// benchFile opens a 64 MiB file with O_DIRECT where the temporary
// directory's file system takes it, else through the page cache.
func benchFile(b *testing.B) Backend {
	dir := b.TempDir()
	buffered := !directOK(dir)
	if buffered {
		b.Logf("%s does not take O_DIRECT; benchmarking the page cache", dir)
	}
	return mustOpen(b, "file", Options{Path: filepath.Join(dir, "bench.img"), Size: 64 << 20, Buffered: buffered})
}

// benchBlocks does io with the 4 KiB buf at each block of the file's
// first 4 MiB in turn, once an iteration.
func benchBlocks(b *testing.B, io func(p []byte, off int64) error, buf []byte) {
	b.SetBytes(4096)
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		if err := io(buf, i%1024*4096); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkFileReadAt(b *testing.B) {
	f := benchFile(b)
	buf := pattern(b, 4096, 0)
	for i := int64(0); i < 1024; i++ {
		if err := f.WriteAt(buf, i*4096); err != nil {
			b.Fatal(err)
		}
	}
	benchBlocks(b, f.ReadAt, buf)
}

func BenchmarkFileWriteAt(b *testing.B) {
	f := benchFile(b)
	buf := pattern(b, 4096, 0)
	benchBlocks(b, f.WriteAt, buf)
}

func BenchmarkNullblkRead(b *testing.B) {
	f := mustOpen(b, "nullblk", Options{Size: 1 << 30})
	buf := alignedBuf(b, 4096)
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		if err := f.ReadAt(buf, 0); err != nil {
			b.Fatal(err)
		}
	}
}
