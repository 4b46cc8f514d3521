package durability

import (
	"bytes"
	"strings"
	"testing"
)

const testBS = 4096

// blk is write seq of block b, as the writer writes it.
func blk(b int64, seq uint64) []byte {
	d := make([]byte, testBS)
	FillBlock(d, b, seq)
	return d
}

// at is the first 512-byte sector of block b.
func at(b int64) uint64 { return uint64(b) * testBS / 512 }

func record(t *testing.T, text string) *Record {
	t.Helper()
	r, err := ReadRecord(strings.NewReader("durability-record 1 block_size 4096\n" + text))
	if err != nil {
		t.Fatalf("ReadRecord: %v", err)
	}
	return r
}

// checkCases are dm-log-writes logs, the writer's record of the same run,
// and the violations Check must find (by substring, in order).
var checkCases = []struct {
	name string
	log  *logBuilder
	rec  string
	want []string
}{
	{
		name: "FUA write before the mark",
		log:  newLogBuilder(512).write(at(3), blk(3, 1), FlagFUA).mark("m1"),
		rec:  "D 3 1\nM m1\n",
	},
	{
		name: "plain write, flush, mark",
		log:  newLogBuilder(512).write(at(3), blk(3, 1), 0).flush().mark("m1"),
		rec:  "W 3 1\nD 3 1\nM m1\n",
	},
	{
		// The defect this package exists to catch: a write the host
		// was told is durable (FUA) reached the device without FUA and
		// no flush followed before the mark.
		name: "write without FUA or flush before the mark",
		log:  newLogBuilder(512).write(at(3), blk(3, 1), 0).mark("m1").flush().mark("m2"),
		rec:  "D 3 1\nM m1\nM m2\n",
		want: []string{"power cut at mark m1 (log entry 1): block 3 (byte offset 12288): want seq 1 (acknowledged durable), found zeros"},
	},
	{
		name: "an older durable write survives a newer unflushed one",
		log: newLogBuilder(512).write(at(3), blk(3, 1), 0).flush().
			write(at(3), blk(3, 2), 0).mark("m1").flush().mark("m2"),
		rec: "W 3 1\nD 3 1\nW 3 2\nM m1\nD 3 2\nM m2\n",
	},
	{
		name: "the newer write promised durable, only the older on media",
		log: newLogBuilder(512).write(at(3), blk(3, 1), 0).flush().
			write(at(3), blk(3, 2), 0).mark("m1"),
		rec:  "D 3 1\nD 3 2\nM m1\n",
		want: []string{"block 3 (byte offset 12288): want seq 2 (acknowledged durable), found block 3 seq 1"},
	},
	{
		name: "acknowledged but never promised durable: lost is fine",
		log:  newLogBuilder(512).write(at(3), blk(3, 1), 0).mark("m1"),
		rec:  "W 3 1\nM m1\n",
	},
	{
		name: "a newer write flushed before the mark is fine",
		log: newLogBuilder(512).write(at(3), blk(3, 1), FlagFUA).write(at(3), blk(3, 2), 0).flush().
			mark("m1"),
		rec: "D 3 1\nW 3 2\nM m1\n",
	},
	{
		name: "a FUA write is newer than what the cache held for the block",
		log: newLogBuilder(512).write(at(3), blk(3, 1), 0).write(at(3), blk(3, 2), FlagFUA).flush().
			mark("m1"),
		rec: "W 3 1\nD 3 2\nM m1\n",
	},
	{
		name: "a write flagged flush flushes what came before it, not itself",
		log: newLogBuilder(512).write(at(3), blk(3, 1), 0).write(at(4), blk(4, 2), FlagFlush).
			mark("m1"),
		rec:  "D 3 1\nD 4 2\nM m1\n",
		want: []string{"block 4 (byte offset 16384): want seq 2 (acknowledged durable), found zeros"},
	},
	{
		name: "two blocks in one logged write",
		log:  newLogBuilder(512).write(at(5), append(blk(5, 1), blk(6, 2)...), FlagFUA).mark("m1"),
		rec:  "D 5 1\nD 6 2\nM m1\n",
	},
	{
		name: "a write landing on another block",
		log:  newLogBuilder(512).write(at(5), blk(6, 2), FlagFUA).write(at(6), blk(6, 2), FlagFUA).mark("m1"),
		rec:  "D 5 1\nD 6 2\nM m1\n",
		want: []string{"block 5 (byte offset 20480): want seq 1 (acknowledged durable), found block 6 seq 2"},
	},
	{
		name: "half a block (torn)",
		log:  newLogBuilder(512).write(at(2), blk(2, 1)[:2048], FlagFUA).mark("m1"),
		rec:  "D 2 1\nM m1\n",
		want: []string{"found bytes that are no whole write of this writer"},
	},
	{
		name: "discard after the durable write, flushed",
		log: newLogBuilder(512).write(at(2), blk(2, 1), FlagFUA).discard(0, 1<<40).flush().
			mark("m1"),
		rec:  "D 2 1\nM m1\n",
		want: []string{"found zeros"},
	},
	{
		name: "4096-byte sectors",
		log:  newLogBuilder(4096).write(2, blk(2, 1), 0).write(7, blk(7, 2), FlagFUA).mark("m1"),
		rec:  "D 2 1\nD 7 2\nM m1\n",
		want: []string{"block 2 (byte offset 8192): want seq 1"},
	},
	{
		name: "other marks in the log are ignored",
		log: newLogBuilder(512).mark("boot").write(at(1), blk(1, 1), FlagFUA).mark("m1").
			mark("dm-log-writes-end"),
		rec: "D 1 1\nM m1\n",
	},
	{
		name: "every mark is a power cut of its own",
		log: newLogBuilder(512).write(at(1), blk(1, 1), 0).mark("m1").write(at(2), blk(2, 2), FlagFUA).
			mark("m2").flush().mark("m3"),
		rec:  "D 1 1\nM m1\nD 2 2\nM m2\nM m3\n",
		want: []string{"power cut at mark m1 (log entry 1): block 1", "power cut at mark m2 (log entry 3): block 1"},
	},
}

func TestCheck(t *testing.T) {
	for _, tc := range checkCases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Check(tc.log.log(t), record(t, tc.rec))
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if rep.Marks == 0 || rep.Blocks == 0 {
				t.Fatalf("checked nothing: %v", rep)
			}
			if len(rep.Violations) != len(tc.want) {
				t.Fatalf("%d violations, want %d: %v", len(rep.Violations), len(tc.want), rep.Violations)
			}
			for i, v := range rep.Violations {
				if !strings.Contains(v.Error(), tc.want[i]) {
					t.Errorf("violation %d: %q, want it to contain %q", i, v.Error(), tc.want[i])
				}
			}
		})
	}
}

func TestCheckMarks(t *testing.T) {
	l := newLogBuilder(512).write(at(1), blk(1, 1), FlagFUA).mark("m2").mark("m1").log(t)
	if _, err := Check(l, record(t, "D 1 1\nM m1\nM m2\n")); err == nil || !strings.Contains(err.Error(), "number 2") {
		t.Errorf("marks out of order: %v", err)
	}
	if _, err := Check(l, record(t, "D 1 1\nM m2\nM m1\nM m3\n")); err == nil || !strings.Contains(err.Error(), `first missing: "m3"`) {
		t.Errorf("mark missing from the log: %v", err)
	}
	if _, err := Check(l, &Record{BlockSize: 768}); err == nil {
		t.Errorf("block size not a multiple of the sector size: no error")
	}
}

func TestCheckDevice(t *testing.T) {
	l := newLogBuilder(512).write(at(1), blk(1, 1), FlagFUA).write(at(2), blk(2, 2), 0).log(t)
	rec := record(t, "D 1 1\nW 2 2\n")
	dev := make([]byte, 4*testBS)
	copy(dev[1*testBS:], blk(1, 1))
	copy(dev[2*testBS:], blk(2, 2))
	if err := CheckDevice(l, rec, bytes.NewReader(dev)); err != nil {
		t.Fatalf("CheckDevice on the matching device: %v", err)
	}
	copy(dev[2*testBS:], blk(2, 1))
	err := CheckDevice(l, rec, bytes.NewReader(dev))
	if want := "block 2: the replayed log gives block 2 seq 2, the data device holds block 2 seq 1"; err == nil || err.Error() != want {
		t.Fatalf("CheckDevice on a stale block: %v, want %q", err, want)
	}
}

func TestVerify(t *testing.T) {
	rec := record(t, "W 1 1\nD 1 1\nW 2 2\nD 3 3\nD 1 4\n")
	dev := make([]byte, 4*testBS)
	copy(dev[1*testBS:], blk(1, 4))
	copy(dev[2*testBS:], blk(2, 2))
	copy(dev[3*testBS:], blk(3, 3))
	rep, err := Verify(bytes.NewReader(dev), rec)
	if err != nil || rep.Blocks != 3 || len(rep.Violations) != 0 {
		t.Fatalf("Verify of the right content: %v, %v", rep, err)
	}
	copy(dev[1*testBS:], blk(1, 1)) // an older write: a lost acknowledged one
	rep, _ = Verify(bytes.NewReader(dev), rec)
	want := "final state: block 1 (byte offset 4096): want seq 4 (the newest write acknowledged), found block 1 seq 1"
	if len(rep.Violations) != 1 || rep.Violations[0].Error() != want {
		t.Fatalf("Verify of a stale block: %v, want %q", rep.Violations, want)
	}
}

func TestReadRecord(t *testing.T) {
	rec := record(t, "W 0 1\nD 0 1\nM m00001\n")
	want := []Op{{Kind: OpAcked, Block: 0, Seq: 1}, {Kind: OpDurable, Block: 0, Seq: 1}, {Kind: OpMark, Mark: "m00001"}}
	if rec.BlockSize != 4096 || len(rec.Ops) != len(want) {
		t.Fatalf("record %+v", rec)
	}
	for i := range want {
		if rec.Ops[i] != want[i] {
			t.Errorf("op %d: %+v, want %+v", i, rec.Ops[i], want[i])
		}
	}
	for _, bad := range []string{"", "durability-record 2 block_size 4096\n", "durability-record 1 block_size 100\n",
		"durability-record 1 block_size 4096\nX 1 1\n", "durability-record 1 block_size 4096\nW 1\n",
		"durability-record 1 block_size 4096\nW -1 1\n", "durability-record 1 block_size 4096\nD 1 0\n",
		"durability-record 1 block_size 4096\nM\n", "durability-record 1 block_size 4096\n\n"} {
		if _, err := ReadRecord(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadRecord(%q): no error", bad)
		}
	}
}

func TestPattern(t *testing.T) {
	b := blk(7, 42)
	if c := ReadBlock(b); c != (Content{Kind: Written, Block: 7, Seq: 42}) {
		t.Fatalf("ReadBlock of block 7 seq 42: %v", c)
	}
	if bytes.Equal(b, blk(7, 43)) || bytes.Equal(b[patFill:], blk(8, 42)[patFill:]) {
		t.Errorf("two writes share their fill bytes")
	}
	b[testBS-1] ^= 1
	if c := ReadBlock(b); c.Kind != Foreign {
		t.Errorf("a flipped bit: %v, want foreign", c)
	}
	if c := ReadBlock(make([]byte, testBS)); c.Kind != Zeros {
		t.Errorf("zeros: %v", c)
	}
}
