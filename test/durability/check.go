package durability

import (
	"fmt"
	"io"
	"slices"
	"sort"
)

// Violation is a block that does not hold what the writer was promised.
type Violation struct {
	Mark    string // the mark whose power cut is modelled; "" for a device's final state
	Entry   int    // the mark's position in the log
	Block   int64
	Durable uint64 // newest write of the block acknowledged as durable; 0 for none
	Newest  uint64 // newest write of the block acknowledged at all
	Found   Content
	offset  int64
}

func (v Violation) Error() string {
	where := "final state"
	if v.Mark != "" {
		where = fmt.Sprintf("power cut at mark %s (log entry %d)", v.Mark, v.Entry)
	}
	want := fmt.Sprintf("seq %d..%d (seq %d acknowledged durable)", v.Durable, v.Newest, v.Durable)
	switch {
	case v.Mark == "":
		want = fmt.Sprintf("seq %d (the newest write acknowledged)", v.Newest)
	case v.Durable == v.Newest:
		want = fmt.Sprintf("seq %d (acknowledged durable)", v.Durable)
	case v.Durable == 0:
		want = fmt.Sprintf("zeros or seq 1..%d (none acknowledged durable)", v.Newest)
	}
	return fmt.Sprintf("%s: block %d (byte offset %d): want %s, found %s", where, v.Block, v.offset, want, v.Found)
}

// Report is the outcome of a check.
type Report struct {
	Log        Counts // what the log holds; zero for Verify
	Marks      int    // marks of the writer checked
	Blocks     int    // block checks made
	Violations []Violation
}

func (r *Report) String() string {
	s := fmt.Sprintf("%d block checks, %d violations", r.Blocks, len(r.Violations))
	if r.Log != (Counts{}) {
		s = fmt.Sprintf("log: %v; %d marks, %s", r.Log, r.Marks, s)
	}
	return s
}

// media models what a device with a volatile write cache holds, for the
// writer's blocks only (a log also holds the host's other writes, of which
// a discard can span the whole device).
type media struct {
	ss, bs int64
	blocks []int64          // the writer's blocks, ascending
	stable map[int64][]byte // sector → data on stable media
	cache  map[int64][]byte // sector → data written, not yet flushed
	zero   []byte           // a discarded sector
}

func newMedia(l *Log, rec *Record) (*media, error) {
	ss := int64(l.SectorSize)
	if int64(rec.BlockSize)%ss != 0 {
		return nil, fmt.Errorf("record block size %d is not a multiple of the log's sector size %d", rec.BlockSize, ss)
	}
	return &media{ss: ss, bs: int64(rec.BlockSize), blocks: rec.blocks(),
		stable: map[int64][]byte{}, cache: map[int64][]byte{}, zero: make([]byte, ss)}, nil
}

// apply replays one log entry.
func (m *media) apply(l *Log, e Entry) error {
	if e.Flags&FlagMark != 0 {
		return nil
	}
	if e.Flags&FlagFlush != 0 {
		// The flush completed: whatever was cached before it is stable. A
		// flush carrying data (REQ_PREFLUSH on a write) flushes first.
		for s, d := range m.cache {
			m.stable[s] = d
		}
		clear(m.cache)
	}
	if e.Sectors == 0 {
		return nil
	}
	var data []byte
	first := int64(e.Sector)
	return m.eachSector(first, first+int64(e.Sectors), func(s int64) error {
		d := m.zero
		if e.Flags&FlagDiscard == 0 {
			if data == nil {
				var err error
				if data, err = l.Data(e); err != nil {
					return err
				}
			}
			d = data[(s-first)*m.ss : (s-first+1)*m.ss]
		}
		if e.Flags&FlagFUA != 0 {
			// On media at completion, and newer than anything cached.
			m.stable[s] = d
			delete(m.cache, s)
		} else {
			m.cache[s] = d
		}
		return nil
	})
}

// eachSector calls fn for every sector in [from, to) inside one of the
// writer's blocks.
func (m *media) eachSector(from, to int64, fn func(int64) error) error {
	per := m.bs / m.ss
	i := sort.Search(len(m.blocks), func(i int) bool { return (m.blocks[i]+1)*per > from })
	for ; i < len(m.blocks) && m.blocks[i]*per < to; i++ {
		for s := max(from, m.blocks[i]*per); s < min(to, (m.blocks[i]+1)*per); s++ {
			if err := fn(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// block assembles a block from the sectors of one layer (or two, the
// second taking precedence) of the media.
func (m *media) block(b int64, buf []byte, layers ...map[int64][]byte) []byte {
	per := m.bs / m.ss
	for i := int64(0); i < per; i++ {
		d := m.zero
		for _, l := range layers {
			if x, ok := l[b*per+i]; ok {
				d = x
			}
		}
		copy(buf[i*m.ss:], d)
	}
	return buf
}

// judge compares a block's content with the promises made about it.
func judge(p *promises, b int64, c Content) bool {
	d, n := p.durable[b], p.newest[b]
	switch c.Kind {
	case Zeros:
		return d == 0
	case Written:
		return c.Block == b && c.Seq >= d && c.Seq <= n
	}
	return false
}

// Check replays the log and, at every mark the writer set, checks each of
// its blocks against a power cut at that moment: the media then hold every
// write logged before the last flush, every FUA write, and nothing else
// (writes still in the volatile cache are lost). A block the writer was
// told is durable must hold that write or a newer one of its own; a block
// never made durable may also hold zeros. Marks of the record missing from
// the log, or in another order, are an error: the log does not describe
// the run.
func Check(l *Log, rec *Record) (*Report, error) {
	m, err := newMedia(l, rec)
	if err != nil {
		return nil, err
	}
	var marks []string
	for _, op := range rec.Ops {
		if op.Kind == OpMark {
			marks = append(marks, op.Mark)
		}
	}
	rep := &Report{Log: l.Counts()}
	p := newPromises()
	next := 0 // next op of the record to fold in
	buf := make([]byte, rec.BlockSize)
	for _, e := range l.Entries {
		if err := m.apply(l, e); err != nil {
			return nil, err
		}
		if e.Flags&FlagMark == 0 {
			continue
		}
		i := slices.Index(marks, e.Mark)
		if i < 0 {
			continue // not the writer's (dm-log-writes-end, for one)
		}
		if i != rep.Marks {
			return nil, fmt.Errorf("%v: the writer set this mark as its number %d, but %d of its marks came before it in the log", e, i+1, rep.Marks)
		}
		rep.Marks++
		for ; next < len(rec.Ops); next++ {
			op := rec.Ops[next]
			if op.Kind == OpMark && op.Mark == e.Mark {
				next++
				break
			}
			p.apply(op)
		}
		for _, b := range m.blocks {
			if p.newest[b] == 0 {
				continue
			}
			rep.Blocks++
			c := ReadBlock(m.block(b, buf, m.stable))
			if !judge(p, b, c) {
				rep.Violations = append(rep.Violations, Violation{Mark: e.Mark, Entry: e.Index, Block: b,
					Durable: p.durable[b], Newest: p.newest[b], Found: c, offset: b * m.bs})
			}
		}
	}
	if rep.Marks < len(marks) {
		return nil, fmt.Errorf("the log holds %d of the writer's %d marks; first missing: %q (was logging disabled? dmsetup status shows logging_disabled when the log device is full)",
			rep.Marks, len(marks), marks[rep.Marks])
	}
	return rep, nil
}

// CheckDevice checks the replay itself: the whole log replayed, volatile
// cache included, must give every block of the record exactly as dev (the
// data device under dm-log-writes) holds it.
func CheckDevice(l *Log, rec *Record, dev io.ReaderAt) error {
	m, err := newMedia(l, rec)
	if err != nil {
		return err
	}
	for _, e := range l.Entries {
		if err := m.apply(l, e); err != nil {
			return err
		}
	}
	want := make([]byte, rec.BlockSize)
	got := make([]byte, rec.BlockSize)
	for _, b := range m.blocks {
		m.block(b, want, m.stable, m.cache)
		if _, err := dev.ReadAt(got, b*m.bs); err != nil {
			return fmt.Errorf("read block %d of the data device: %w", b, err)
		}
		if string(got) != string(want) {
			return fmt.Errorf("block %d: the replayed log gives %s, the data device holds %s", b, ReadBlock(want), ReadBlock(got))
		}
	}
	return nil
}

// Verify reads every block of the record back from dev, which was not
// power cut: each must hold exactly the newest write acknowledged to it.
func Verify(dev io.ReaderAt, rec *Record) (*Report, error) {
	p := newPromises()
	for _, op := range rec.Ops {
		p.apply(op)
	}
	rep := &Report{}
	buf := make([]byte, rec.BlockSize)
	for _, b := range rec.blocks() {
		off := b * int64(rec.BlockSize)
		if _, err := dev.ReadAt(buf, off); err != nil {
			return nil, fmt.Errorf("read block %d at byte %d: %w", b, off, err)
		}
		rep.Blocks++
		c := ReadBlock(buf)
		if c.Kind != Written || c.Block != b || c.Seq != p.newest[b] {
			rep.Violations = append(rep.Violations, Violation{Block: b, Durable: p.newest[b], Newest: p.newest[b], Found: c, offset: off})
		}
	}
	return rep, nil
}
