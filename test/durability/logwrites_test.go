package durability

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// logBuilder writes a dm-log-writes log the way the kernel lays it out.
type logBuilder struct {
	ss      int
	entries bytes.Buffer
	n       uint64
}

func newLogBuilder(ss int) *logBuilder { return &logBuilder{ss: ss} }

func (b *logBuilder) entry(sector, sectors uint64, flags Flags, mark string, data []byte) *logBuilder {
	hdr := make([]byte, b.ss)
	le := binary.LittleEndian
	le.PutUint64(hdr[entrySector:], sector)
	le.PutUint64(hdr[entryNrSectors:], sectors)
	le.PutUint64(hdr[entryFlags:], uint64(flags))
	le.PutUint64(hdr[entryDataLen:], uint64(len(mark)))
	copy(hdr[entryLen:], mark)
	b.entries.Write(hdr)
	b.entries.Write(data)
	b.n++
	return b
}

// write logs data written at sector (in units of the sector size).
func (b *logBuilder) write(sector uint64, data []byte, flags Flags) *logBuilder {
	return b.entry(sector, uint64(len(data)/b.ss), flags, "", data)
}
func (b *logBuilder) flush() *logBuilder           { return b.entry(0, 0, FlagFlush, "", nil) }
func (b *logBuilder) mark(name string) *logBuilder { return b.entry(0, 0, FlagMark, name, nil) }
func (b *logBuilder) discard(sector, n uint64) *logBuilder {
	return b.entry(sector, n, FlagDiscard, "", nil)
}

func (b *logBuilder) bytes() []byte {
	super := make([]byte, b.ss)
	le := binary.LittleEndian
	le.PutUint64(super[superMagic:], logMagic)
	le.PutUint64(super[superVersion:], logVersion)
	le.PutUint64(super[superNrEntries:], b.n)
	le.PutUint32(super[superSectorSize:], uint32(b.ss))
	return append(super, b.entries.Bytes()...)
}

func (b *logBuilder) log(t testing.TB) *Log {
	t.Helper()
	raw := b.bytes()
	l, err := ReadLog(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatalf("ReadLog: %v", err)
	}
	return l
}

func TestReadLog(t *testing.T) {
	d := bytes.Repeat([]byte{0xab}, 1024)
	l := newLogBuilder(512).write(8, d, FlagFUA).flush().mark("m1").discard(100, 7).write(2, d[:512], 0).log(t)
	if l.SectorSize != 512 {
		t.Errorf("sector size %d, want 512", l.SectorSize)
	}
	want := []Entry{
		{Index: 0, Sector: 8, Sectors: 2, Flags: FlagFUA},
		{Index: 1, Flags: FlagFlush},
		{Index: 2, Flags: FlagMark, Mark: "m1"},
		{Index: 3, Sector: 100, Sectors: 7, Flags: FlagDiscard},
		{Index: 4, Sector: 2, Sectors: 1},
	}
	if len(l.Entries) != len(want) {
		t.Fatalf("%d entries, want %d: %v", len(l.Entries), len(want), l.Entries)
	}
	for i, w := range want {
		e := l.Entries[i]
		e.dataOff = 0
		if e != w {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
	}
	got, err := l.Data(l.Entries[0])
	if err != nil || !bytes.Equal(got, d) {
		t.Errorf("data of entry 0: %d bytes, err %v; want the 1024 bytes written", len(got), err)
	}
	if got, _ := l.Data(l.Entries[4]); !bytes.Equal(got, d[:512]) {
		t.Errorf("data of entry 4 differs (the discard before it must take no log space)")
	}
	if c := l.Counts(); c != (Counts{Writes: 2, FUA: 1, Flushes: 1, Discards: 1, Marks: 1}) {
		t.Errorf("counts %+v", c)
	}
}

func TestReadLogRejects(t *testing.T) {
	valid := newLogBuilder(512).write(0, make([]byte, 512), 0).mark("x").bytes()
	le := binary.LittleEndian
	for _, tc := range []struct {
		name  string
		edit  func(b []byte) []byte
		error string
	}{
		{"empty", func(b []byte) []byte { return nil }, "no dm-log-writes super block"},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }, "no dm-log-writes super block"},
		{"version", func(b []byte) []byte { le.PutUint64(b[superVersion:], 2); return b }, "version 2"},
		{"sector size", func(b []byte) []byte { le.PutUint32(b[superSectorSize:], 768); return b }, "sector size 768"},
		{"too many entries", func(b []byte) []byte { le.PutUint64(b[superNrEntries:], 1<<40); return b }, "cannot fit"},
		{"one entry more", func(b []byte) []byte { le.PutUint64(b[superNrEntries:], 3); return b }, "past the end"},
		{"truncated data", func(b []byte) []byte { return b[:512+512+512+100] }, "past the end"},
		{"data past end", func(b []byte) []byte { le.PutUint64(b[512+entryNrSectors:], 1<<60); return b }, "run past the end"},
		{"long mark", func(b []byte) []byte { le.PutUint64(b[3*512+entryDataLen:], 481); return b }, "does not fit"},
		{"private data", func(b []byte) []byte { le.PutUint64(b[512+entryDataLen:], 4); return b }, "private data"},
		{"sector overflow", func(b []byte) []byte { le.PutUint64(b[512+entrySector:], 1<<62); return b }, "overflow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.edit(bytes.Clone(valid))
			_, err := ReadLog(bytes.NewReader(b), int64(len(b)))
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("ReadLog: %v, want an error containing %q", err, tc.error)
			}
		})
	}
	if _, err := ReadLog(bytes.NewReader(nil), 0); !errors.Is(err, ErrNotLog) {
		t.Errorf("empty log: %v, want ErrNotLog", err)
	}
}

// FuzzReadLog: no input makes the parser, or a replay of what it accepts,
// panic or allocate beyond the input's size.
func FuzzReadLog(f *testing.F) {
	blk := make([]byte, 4096)
	FillBlock(blk, 1, 1)
	f.Add(newLogBuilder(512).write(8, blk, FlagFUA).flush().mark("m00001").bytes())
	f.Add(newLogBuilder(4096).write(1, blk, 0).discard(0, 1<<40).flush().mark("m00001").bytes())
	f.Add(newLogBuilder(512).write(8, blk, FlagFlush).mark("m00001").bytes()[:2000])
	rec := &Record{BlockSize: 4096, Ops: []Op{{Kind: OpDurable, Block: 1, Seq: 1}, {Kind: OpMark, Mark: "m00001"},
		{Kind: OpAcked, Block: 0, Seq: 2}, {Kind: OpAcked, Block: 1 << 40, Seq: 3}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ReadLog(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for _, e := range l.Entries {
			d, err := l.Data(e)
			if err != nil {
				t.Fatalf("%v: accepted by ReadLog, but its data cannot be read: %v", e, err)
			}
			if len(d) > len(b) {
				t.Fatalf("%v: %d bytes of data from a %d-byte log", e, len(d), len(b))
			}
		}
		Check(l, rec)
		CheckDevice(l, rec, bytes.NewReader(nil))
	})
}
