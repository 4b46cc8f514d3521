package durability

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The record is the writer's account of what it was told, one line per
// event, in the order the events happened:
//
//	durability-record 1 block_size 4096
//	W BLOCK SEQ   the write completed (acknowledged, not yet durable)
//	D BLOCK SEQ   the write is durable: it completed with FUA, or a
//	              flush issued after it completed has completed
//	M NAME        a dm-log-writes mark was set; no write was in flight
const recordHeader = "durability-record 1"

// OpKind is the kind of a record line.
type OpKind byte

const (
	OpAcked   OpKind = 'W'
	OpDurable OpKind = 'D'
	OpMark    OpKind = 'M'
)

// Op is one line of a record.
type Op struct {
	Kind  OpKind
	Block int64
	Seq   uint64
	Mark  string
}

// Record is a parsed record.
type Record struct {
	BlockSize int
	Ops       []Op
}

// ReadRecord parses a record.
func ReadRecord(r io.Reader) (*Record, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("record: %w", err)
		}
		return nil, fmt.Errorf("record: empty, want the header %q", recordHeader)
	}
	var bs int
	if _, err := fmt.Sscanf(sc.Text(), recordHeader+" block_size %d", &bs); err != nil {
		return nil, fmt.Errorf("record line 1: %q is not a %q header: %v", sc.Text(), recordHeader, err)
	}
	if bs < MinBlockSize {
		return nil, fmt.Errorf("record line 1: block_size %d below %d", bs, MinBlockSize)
	}
	rec := &Record{BlockSize: bs}
	for line := 2; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		bad := func(why string) error {
			return fmt.Errorf("record line %d: %q: %s", line, sc.Text(), why)
		}
		if len(f) == 0 {
			return nil, bad("empty line")
		}
		switch k := OpKind(f[0][0]); {
		case len(f[0]) != 1:
			return nil, bad("unknown event")
		case k == OpMark:
			if len(f) != 2 {
				return nil, bad("want M NAME")
			}
			rec.Ops = append(rec.Ops, Op{Kind: k, Mark: f[1]})
		case k == OpAcked || k == OpDurable:
			if len(f) != 3 {
				return nil, bad("want " + string(k) + " BLOCK SEQ")
			}
			b, err1 := strconv.ParseInt(f[1], 10, 64)
			s, err2 := strconv.ParseUint(f[2], 10, 64)
			if err1 != nil || err2 != nil || b < 0 || s == 0 {
				return nil, bad("block must be a number from 0, seq from 1")
			}
			rec.Ops = append(rec.Ops, Op{Kind: k, Block: b, Seq: s})
		default:
			return nil, bad("unknown event")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return rec, nil
}

// RecordWriter writes a record as events happen.
type RecordWriter struct {
	w *bufio.Writer
}

func NewRecordWriter(w io.Writer, blockSize int) (*RecordWriter, error) {
	rw := &RecordWriter{w: bufio.NewWriter(w)}
	fmt.Fprintf(rw.w, "%s block_size %d\n", recordHeader, blockSize)
	return rw, rw.w.Flush()
}

func (rw *RecordWriter) Acked(block int64, seq uint64)   { fmt.Fprintf(rw.w, "W %d %d\n", block, seq) }
func (rw *RecordWriter) Durable(block int64, seq uint64) { fmt.Fprintf(rw.w, "D %d %d\n", block, seq) }
func (rw *RecordWriter) Mark(name string)                { fmt.Fprintf(rw.w, "M %s\n", name) }

// Flush writes out buffered lines, so a reader sees the writer's progress.
func (rw *RecordWriter) Flush() error { return rw.w.Flush() }

// promises folds a record's events, one at a time, into what the writer
// was promised about each block so far.
type promises struct {
	durable map[int64]uint64 // newest write acknowledged as durable
	newest  map[int64]uint64 // newest write acknowledged at all
}

func newPromises() *promises {
	return &promises{durable: map[int64]uint64{}, newest: map[int64]uint64{}}
}

func (p *promises) apply(op Op) {
	switch op.Kind {
	case OpDurable:
		p.durable[op.Block] = max(p.durable[op.Block], op.Seq)
		fallthrough
	case OpAcked:
		p.newest[op.Block] = max(p.newest[op.Block], op.Seq)
	}
}

// blocks lists every block the record writes, in ascending order.
func (r *Record) blocks() []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, op := range r.Ops {
		if op.Kind != OpMark && !seen[op.Block] {
			seen[op.Block] = true
			out = append(out, op.Block)
		}
	}
	slices.Sort(out)
	return out
}
