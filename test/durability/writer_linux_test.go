package durability

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrite runs the writer against a file (O_DIRECT needs a file system
// that has it: the test's temporary directory must not be tmpfs) and
// reads the file back against the record.
func TestWrite(t *testing.T) {
	for _, durable := range []string{DurableDSync, DurableFdatasync} {
		t.Run(durable, func(t *testing.T) {
			dev := filepath.Join(t.TempDir(), "dev.img")
			if err := os.WriteFile(dev, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(dev, 64*4096); err != nil {
				t.Fatal(err)
			}
			var rec bytes.Buffer
			var marks []string
			batches := 0
			st, err := Write(WriterConfig{Device: dev, BlockSize: 4096, Blocks: 64, Batches: 40, Depth: 4,
				Durable: durable, Seed: 3, MarkEvery: 2, Record: &rec,
				Mark:     func(name string) error { marks = append(marks, name); return nil },
				Progress: func(int) { batches++ }})
			if err != nil {
				if strings.Contains(err.Error(), "invalid argument") {
					t.Fatalf("Write: %v (O_DIRECT unsupported? set TMPDIR to a directory on ext4 or xfs)", err)
				}
				t.Fatalf("Write: %v", err)
			}
			if st.Writes != 40*4 || batches != 40 || st.DSyncBatches == 0 || st.FlushBatches == 0 || st.UnflushedBatches == 0 {
				t.Fatalf("stats %v after %d batches: want 160 writes and every kind of batch", st, batches)
			}
			if len(marks) != st.Marks || st.Marks != (st.DSyncBatches+st.FlushBatches)/2 {
				t.Errorf("%d marks set, stats say %d, want one per two durable batches", len(marks), st.Marks)
			}
			if durable == DurableDSync && st.Flushes != st.FlushBatches {
				t.Errorf("%d fdatasyncs for %d flushed batches: dsync batches must not flush", st.Flushes, st.FlushBatches)
			}
			r, err := ReadRecord(&rec)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(dev)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			rep, err := Verify(f, r)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Blocks == 0 || len(rep.Violations) != 0 {
				t.Fatalf("Verify: %v: %v", rep, rep.Violations)
			}
			// A lost write is seen.
			blocks := r.blocks()
			w, err := os.OpenFile(dev, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if _, err := w.WriteAt(blk(blocks[0], 1<<40), blocks[0]*4096); err != nil {
				t.Fatal(err)
			}
			if rep, _ := Verify(f, r); len(rep.Violations) != 1 || rep.Violations[0].Block != blocks[0] {
				t.Fatalf("Verify after overwriting block %d: %v", blocks[0], rep.Violations)
			}
		})
	}
}
