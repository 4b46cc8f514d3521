package durability

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The dm-log-writes log, as drivers/md/dm-log-writes.c writes it: a super
// block at byte 0, then nr_entries entries, each one sector (of the data
// device's logical block size) holding a log_write_entry, followed by the
// data the write carried (none for flushes, discards and marks). All
// fields are little endian.
const (
	logMagic   = 0x6a736677736872
	logVersion = 1

	superMagic      = 0  // __le64 magic
	superVersion    = 8  // __le64 version
	superNrEntries  = 16 // __le64 nr_entries
	superSectorSize = 24 // __le32 sectorsize
	superLen        = 28

	entrySector    = 0  // __le64 sector, in units of sectorsize
	entryNrSectors = 8  // __le64 nr_sectors
	entryFlags     = 16 // __le64 flags
	entryDataLen   = 24 // __le64 data_len: mark text length
	entryLen       = 32
)

// Flags of a log entry.
type Flags uint64

const (
	FlagFlush    Flags = 1 << 0 // a cache flush (REQ_PREFLUSH) completed here
	FlagFUA      Flags = 1 << 1 // a FUA write: on media once completed
	FlagDiscard  Flags = 1 << 2
	FlagMark     Flags = 1 << 3 // a mark set from user space
	FlagMetadata Flags = 1 << 4 // REQ_META, informational
)

func (f Flags) String() string {
	var s []string
	for _, n := range []struct {
		f    Flags
		name string
	}{{FlagFlush, "flush"}, {FlagFUA, "fua"}, {FlagDiscard, "discard"}, {FlagMark, "mark"}, {FlagMetadata, "metadata"}} {
		if f&n.f != 0 {
			s = append(s, n.name)
			f &^= n.f
		}
	}
	if f != 0 {
		s = append(s, fmt.Sprintf("%#x", uint64(f)))
	}
	if len(s) == 0 {
		return "write"
	}
	return strings.Join(s, "|")
}

// Entry is one logged event.
type Entry struct {
	Index   int    // position in the log, from 0
	Sector  uint64 // first sector written, in units of the log's SectorSize
	Sectors uint64 // sectors written (0 for a flush or a mark)
	Flags   Flags
	Mark    string // the mark's name, for FlagMark
	dataOff int64  // byte offset of the written data in the log
}

// IsWrite reports whether the entry carries data for the device.
func (e Entry) IsWrite() bool { return e.Flags&(FlagMark|FlagDiscard) == 0 && e.Sectors > 0 }

func (e Entry) String() string {
	if e.Flags&FlagMark != 0 {
		return fmt.Sprintf("entry %d: mark %q", e.Index, e.Mark)
	}
	return fmt.Sprintf("entry %d: %s sectors %d+%d", e.Index, e.Flags, e.Sector, e.Sectors)
}

// Log is a parsed dm-log-writes log. Entry data stays on the log device
// and is read on demand.
type Log struct {
	SectorSize uint32
	Entries    []Entry
	r          io.ReaderAt
}

// ErrNotLog is returned for a device without a dm-log-writes super block.
var ErrNotLog = errors.New("no dm-log-writes super block (magic 0x6a736677736872)")

// maxSectorSize bounds the sector size a super block may claim; block
// devices have logical blocks of 512 to 4096 bytes, a page at most.
const maxSectorSize = 64 << 10

// ReadLog parses the log held in the first size bytes of r. Every entry is
// checked against size, so a damaged or truncated log is an error, never a
// read past its end or an allocation it cannot back.
func ReadLog(r io.ReaderAt, size int64) (*Log, error) {
	var sb [superLen]byte
	if size < superLen {
		return nil, fmt.Errorf("log of %d bytes: %w", size, ErrNotLog)
	}
	if _, err := r.ReadAt(sb[:], 0); err != nil {
		return nil, fmt.Errorf("read super block: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint64(sb[superMagic:]) != logMagic {
		return nil, ErrNotLog
	}
	if v := le.Uint64(sb[superVersion:]); v != logVersion {
		return nil, fmt.Errorf("log format version %d, want %d", v, logVersion)
	}
	ss := le.Uint32(sb[superSectorSize:])
	if ss < 512 || ss > maxSectorSize || ss&(ss-1) != 0 {
		return nil, fmt.Errorf("super block: sector size %d is not a power of two from 512 to %d", ss, maxSectorSize)
	}
	n := le.Uint64(sb[superNrEntries:])
	// Every entry takes at least one sector after the super block's.
	sectors := uint64(size / int64(ss))
	if sectors == 0 {
		return nil, fmt.Errorf("log of %d bytes is smaller than its %d-byte super block sector", size, ss)
	}
	if n > sectors-1 {
		return nil, fmt.Errorf("super block: %d entries cannot fit in a %d-byte log of %d-byte sectors", n, size, ss)
	}
	l := &Log{SectorSize: ss, Entries: make([]Entry, 0, n), r: r}
	hdr := make([]byte, ss)
	off := int64(ss)
	for i := 0; uint64(i) < n; i++ {
		if off > size-int64(ss) {
			return nil, fmt.Errorf("entry %d at byte %d: past the end of the %d-byte log", i, off, size)
		}
		if _, err := r.ReadAt(hdr, off); err != nil {
			return nil, fmt.Errorf("entry %d at byte %d: %w", i, off, err)
		}
		e := Entry{
			Index:   i,
			Sector:  le.Uint64(hdr[entrySector:]),
			Sectors: le.Uint64(hdr[entryNrSectors:]),
			Flags:   Flags(le.Uint64(hdr[entryFlags:])),
		}
		dataLen := le.Uint64(hdr[entryDataLen:])
		off += int64(ss)
		switch {
		case e.Flags&FlagMark != 0:
			if dataLen > uint64(ss-entryLen) {
				return nil, fmt.Errorf("entry %d: mark of %d bytes does not fit its %d-byte sector", i, dataLen, ss)
			}
			e.Mark = string(hdr[entryLen : entryLen+dataLen])
		case dataLen != 0:
			// Only marks carry private data in every kernel so far.
			return nil, fmt.Errorf("entry %d: %d bytes of private data on a %s entry", i, dataLen, e.Flags)
		case e.Flags&FlagDiscard != 0:
			// A discard's range is logged, not its (absent) data.
		default:
			if e.Sectors > uint64(size-off)/uint64(ss) {
				return nil, fmt.Errorf("entry %d: %d sectors of data run past the end of the %d-byte log", i, e.Sectors, size)
			}
			e.dataOff = off
			off += int64(e.Sectors) * int64(ss)
		}
		if e.Sector > (1<<63-1)/uint64(ss) || e.Sectors > (1<<63-1)/uint64(ss)-e.Sector {
			return nil, fmt.Errorf("entry %d: sectors %d+%d overflow a byte offset", i, e.Sector, e.Sectors)
		}
		l.Entries = append(l.Entries, e)
	}
	return l, nil
}

// Data reads the bytes a write entry carried.
func (l *Log) Data(e Entry) ([]byte, error) {
	if !e.IsWrite() {
		return nil, nil
	}
	b := make([]byte, e.Sectors*uint64(l.SectorSize))
	if _, err := l.r.ReadAt(b, e.dataOff); err != nil {
		return nil, fmt.Errorf("%v: read data: %w", e, err)
	}
	return b, nil
}

// Counts summarises a log for reports: how many entries of each kind.
type Counts struct {
	Writes, FUA, Flushes, Discards, Marks int
}

func (l *Log) Counts() Counts {
	var c Counts
	for _, e := range l.Entries {
		switch {
		case e.Flags&FlagMark != 0:
			c.Marks++
		case e.Flags&FlagDiscard != 0:
			c.Discards++
		default:
			if e.Sectors > 0 {
				c.Writes++
				if e.Flags&FlagFUA != 0 {
					c.FUA++
				}
			}
			if e.Flags&FlagFlush != 0 {
				c.Flushes++
			}
		}
	}
	return c
}

func (c Counts) String() string {
	return fmt.Sprintf("%d writes (%d FUA), %d flushes, %d discards, %d marks", c.Writes, c.FUA, c.Flushes, c.Discards, c.Marks)
}
