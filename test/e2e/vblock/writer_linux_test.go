package vblock

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteVerify runs the writer against a file (O_DIRECT needs a file
// system that has it: the test's temporary directory must not be tmpfs),
// checks the ledger and Verify, then puts an older version of one block
// back, as a reordered write would, and a torn one in another.
func TestWriteVerify(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "dev.img")
	if err := os.WriteFile(dev, make([]byte, 100*4096), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := NewLedger(100, 4096)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Write(context.Background(), dev, l, WriteConfig{Writers: 8, Rounds: 3,
		OnError: func(err error) { t.Errorf("I/O error: %v", err) }})
	if err != nil {
		if strings.Contains(err.Error(), "invalid argument") {
			t.Fatalf("Write: %v (O_DIRECT unsupported? set TMPDIR to a directory on ext4 or xfs)", err)
		}
		t.Fatalf("Write: %v", err)
	}
	if st.Writes != 300 || st.Errors != 0 {
		t.Fatalf("stats %v, want 300 writes and no error", st)
	}
	for n, e := range l.Entries {
		if e != (Entry{Acked: 3}) {
			t.Fatalf("block %d: ledger %+v after 3 rounds, want acked 3", n, e)
		}
	}
	r, err := Verify(dev, l)
	if err != nil || r.Blocks != 100 || r.Newest != 100 || len(r.Bad) != 0 {
		t.Fatalf("Verify = %v, %v; want 100 blocks at their newest", r, err)
	}

	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := make([]byte, 4096)
	Encode(old, 17, 2)
	torn := make([]byte, 4096)
	Encode(torn, 40, 4)
	copy(torn[2048:], old[2048:])
	inflight := make([]byte, 4096)
	Encode(inflight, 60, 4)
	l.Entries[60].Pending = 4
	for n, b := range map[int64][]byte{17: old, 40: torn, 60: inflight} {
		if _, err := f.WriteAt(b, n*4096); err != nil {
			t.Fatal(err)
		}
	}
	r, err = Verify(dev, l)
	if err != nil || r.Newest != 97 || r.InFlight != 1 || len(r.Bad) != 2 {
		t.Fatalf("Verify = %v, %v; want 97 newest, 1 in flight, 2 wrong", r, err)
	}
	if !strings.Contains(r.Bad[0].Error(), "block 17: holds version 2, older") || !strings.Contains(r.Bad[1].Error(), "block 40: neither zeros") {
		t.Fatalf("Verify's errors %v: want block 17 older, block 40 torn", r.Bad)
	}
}
