package vblock

import (
	"bufio"
	"fmt"
	"io"
)

// Entry is the ledger's account of one block.
type Entry struct {
	Acked   uint64 // the newest counter the device acknowledged; 0: none
	Pending uint64 // a write sent and not acknowledged (in flight when the writer stopped, or failed); 0: none
}

// Next is the counter of the block's next write: above every counter
// the block may hold.
func (e Entry) Next() uint64 { return max(e.Acked, e.Pending) + 1 }

// Ledger is the writer's account of every block. A block is written by
// one goroutine at a time, which alone touches its entry.
type Ledger struct {
	BlockSize int
	Entries   []Entry
}

// NewLedger is the ledger of blocks never written.
func NewLedger(blocks, blockSize int) (*Ledger, error) {
	if blocks < 1 || blockSize < MinBlockSize || blockSize%MinBlockSize != 0 {
		return nil, fmt.Errorf("%d blocks of %d bytes: want at least one block of a multiple of %d bytes",
			blocks, blockSize, MinBlockSize)
	}
	return &Ledger{BlockSize: blockSize, Entries: make([]Entry, blocks)}, nil
}

const ledgerHeader = "vblock ledger v1 blocks %d block_size %d\n"

// Save writes the ledger: a header, then one line per block written,
// "block acked pending".
func (l *Ledger) Save(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, ledgerHeader, len(l.Entries), l.BlockSize)
	for i, e := range l.Entries {
		if e != (Entry{}) {
			fmt.Fprintf(bw, "%d %d %d\n", i, e.Acked, e.Pending)
		}
	}
	return bw.Flush()
}

// LoadLedger reads what Save wrote.
func LoadLedger(r io.Reader) (*Ledger, error) {
	br := bufio.NewReader(r)
	var blocks, bs int
	if _, err := fmt.Fscanf(br, ledgerHeader, &blocks, &bs); err != nil {
		return nil, fmt.Errorf("ledger header: %w", err)
	}
	l, err := NewLedger(blocks, bs)
	if err != nil {
		return nil, fmt.Errorf("ledger header: %w", err)
	}
	for line := 2; ; line++ {
		var n int
		var e Entry
		_, err := fmt.Fscanf(br, "%d %d %d\n", &n, &e.Acked, &e.Pending)
		if err == io.EOF {
			return l, nil
		}
		if err != nil {
			return nil, fmt.Errorf("ledger line %d: %w", line, err)
		}
		if n < 0 || n >= blocks {
			return nil, fmt.Errorf("ledger line %d: block %d outside 0-%d", line, n, blocks-1)
		}
		l.Entries[n] = e
	}
}

// Report is what Verify found.
type Report struct {
	Blocks   int     // blocks read
	Newest   int     // at their newest acknowledged version (or never written)
	InFlight int     // at the version of a write that was never acknowledged
	Bad      []error // every other block
}

func (r Report) String() string {
	return fmt.Sprintf("%d blocks: %d at their newest acknowledged version, %d at an unacknowledged write's, %d wrong",
		r.Blocks, r.Newest, r.InFlight, len(r.Bad))
}

// Check checks block n's bytes b against the ledger and counts the
// result in r.
func (l *Ledger) Check(r *Report, n int, b []byte) {
	r.Blocks++
	e := l.Entries[n]
	if err := CheckBlock(b, uint64(n), e); err != nil {
		r.Bad = append(r.Bad, err)
		return
	}
	if _, c, _ := Decode(b); c == e.Acked {
		r.Newest++
	} else {
		r.InFlight++
	}
}
