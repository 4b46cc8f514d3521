package backend

import (
	"strings"
	"testing"
)

func TestNullblk(t *testing.T) {
	b := mustOpen(t, "nullblk", Options{Size: 1<<30 + 100, BlockSize: 4096})
	buf := pattern(t, 4096, 1)
	cases := []struct {
		name string
		do   func() error
	}{
		{"write is discarded", func() error { return b.WriteAt(buf, 0) }},
		{"read clears the buffer", func() error { return b.ReadAt(buf, 0) }},
		{"flush", b.Flush},
		{"discard", func() error { return b.(Discarder).Discard(0, 1<<20) }},
		{"write zeroes", func() error { return b.(Zeroer).WriteZeroes(0, 1<<20) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if !isZero(buf) {
		t.Error("read returned data")
	}
	if nb, ok := b.(NonBlocking); !ok || !nb.NonBlocking() {
		t.Error("not marked non-blocking")
	}
	if b.Size() != 1<<30 || b.BlockSize() != 4096 {
		t.Errorf("size %d block size %d, want 1 GiB rounded down to 4096-byte blocks", b.Size(), b.BlockSize())
	}
}

func TestNullblkErrors(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"no size", Options{}, "size is required"},
		{"negative size", Options{Size: -4096}, "size is required"},
		{"smaller than a block", Options{Size: 100, BlockSize: 4096}, "smaller than one 4096-byte block"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open("nullblk", tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
