package nvme

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ANAState is the Asymmetric Namespace Access state of an ANA group as
// one controller (one port) reaches it: the value of the group
// descriptor's state byte.
type ANAState uint8

// ANA states.
const (
	ANAOptimized      ANAState = 0x01
	ANANonOptimized   ANAState = 0x02
	ANAInaccessible   ANAState = 0x03
	ANAPersistentLoss ANAState = 0x04
	ANAChange         ANAState = 0x0f
)

// ANAStates lists every state, in the order of their codes.
var ANAStates = []ANAState{ANAOptimized, ANANonOptimized, ANAInaccessible, ANAPersistentLoss, ANAChange}

// String is the state's name as the configuration writes it.
func (s ANAState) String() string {
	switch s {
	case ANAOptimized:
		return "optimized"
	case ANANonOptimized:
		return "non_optimized"
	case ANAInaccessible:
		return "inaccessible"
	case ANAPersistentLoss:
		return "persistent_loss"
	case ANAChange:
		return "change"
	}
	return fmt.Sprintf("ana_state_%#x", uint8(s))
}

// ParseANAState reads a state's name (String's).
func ParseANAState(name string) (ANAState, bool) {
	for _, s := range ANAStates {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

// Valid reports whether s is one of the defined states.
func (s ANAState) Valid() bool {
	switch s {
	case ANAOptimized, ANANonOptimized, ANAInaccessible, ANAPersistentLoss, ANAChange:
		return true
	}
	return false
}

// IOStatus is the status of a command that needs a namespace in a group
// in state s: success for the two accessible states, otherwise the path
// related status (SCT 3) of the state, without DNR, so that the host's
// multipath retries on another path.
func (s ANAState) IOStatus() Status {
	switch s {
	case ANAInaccessible:
		return StatusANAInaccessible
	case ANAPersistentLoss:
		return StatusANAPersistentLoss
	case ANAChange:
		return StatusANATransition
	}
	return StatusSuccess
}

// ANACAP bits (Identify Controller): which states the controller reports,
// and how ANAGRPID behaves.
const (
	ANACAPOptimized      = 1 << 0
	ANACAPNonOptimized   = 1 << 1
	ANACAPInaccessible   = 1 << 2
	ANACAPPersistentLoss = 1 << 3
	ANACAPChange         = 1 << 4
	// ANACAPGroupIDFixed: a namespace's ANAGRPID does not change while it
	// is attached. Left clear by a target that moves namespaces between
	// groups in place.
	ANACAPGroupIDFixed = 1 << 6
)

// ANA log page (Log Identifier 0Ch): a header, then one descriptor per
// group, each followed by the IDs of its namespaces. Offsets from the NVMe
// base specification, "Asymmetric Namespace Access".
const (
	ANALogHdrSize  = 16
	ANAGroupSize   = 32 // a group descriptor without its NSIDs
	ANANSIDSize    = 4
	anaHdrChgCnt   = 0
	anaHdrNumGrps  = 8
	anaGrpID       = 0
	anaGrpNumNSIDs = 4
	anaGrpChgCnt   = 8
	anaGrpState    = 16
)

// ANALogRGO is the LSP bit of Get Log Page for the ANA log: Return Groups
// Only, without namespace ID lists.
const ANALogRGO = 1 << 0

// ANAGroup is one group descriptor of the ANA log.
type ANAGroup struct {
	ID          uint32
	ChangeCount uint64
	State       ANAState
	NSIDs       []uint32 // ascending; none with RGO
}

// ANALog is the ANA log page.
type ANALog struct {
	ChangeCount uint64
	Groups      []ANAGroup
}

// Size is the length of the encoded page.
func (l *ANALog) Size() int {
	n := ANALogHdrSize
	for _, g := range l.Groups {
		n += ANAGroupSize + ANANSIDSize*len(g.NSIDs)
	}
	return n
}

// Append encodes the page at the end of b and returns the extended slice.
func (l *ANALog) Append(b []byte) []byte {
	le := binary.LittleEndian
	start := len(b)
	b = append(b, make([]byte, l.Size())...)
	p := b[start:]
	le.PutUint64(p[anaHdrChgCnt:], l.ChangeCount)
	le.PutUint16(p[anaHdrNumGrps:], uint16(len(l.Groups)))
	off := ANALogHdrSize
	for _, g := range l.Groups {
		d := p[off:]
		le.PutUint32(d[anaGrpID:], g.ID)
		le.PutUint32(d[anaGrpNumNSIDs:], uint32(len(g.NSIDs)))
		le.PutUint64(d[anaGrpChgCnt:], g.ChangeCount)
		d[anaGrpState] = uint8(g.State)
		off += ANAGroupSize
		for _, id := range g.NSIDs {
			le.PutUint32(p[off:], id)
			off += ANANSIDSize
		}
	}
	return b
}

// ErrANALog is wrapped by every ParseANALog error.
var ErrANALog = errors.New("malformed ANA log page")

// ParseANALog decodes an ANA log page, as a host reads it. The page must
// hold every descriptor the header counts and every NSID each counts;
// bytes after the last are ignored.
func ParseANALog(b []byte) (ANALog, error) {
	le := binary.LittleEndian
	if len(b) < ANALogHdrSize {
		return ANALog{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrANALog, len(b), ANALogHdrSize)
	}
	l := ANALog{ChangeCount: le.Uint64(b[anaHdrChgCnt:])}
	n := int(le.Uint16(b[anaHdrNumGrps:]))
	off := ANALogHdrSize
	for i := range n {
		if len(b)-off < ANAGroupSize {
			return ANALog{}, fmt.Errorf("%w: group descriptor %d of %d ends past the page (%d bytes)", ErrANALog, i, n, len(b))
		}
		d := b[off:]
		g := ANAGroup{ID: le.Uint32(d[anaGrpID:]), ChangeCount: le.Uint64(d[anaGrpChgCnt:]), State: ANAState(d[anaGrpState])}
		nsids := uint64(le.Uint32(d[anaGrpNumNSIDs:]))
		off += ANAGroupSize
		if nsids > uint64(len(b)-off)/ANANSIDSize {
			return ANALog{}, fmt.Errorf("%w: group %d lists %d namespaces past the page (%d bytes)", ErrANALog, g.ID, nsids, len(b))
		}
		if nsids > 0 {
			g.NSIDs = make([]uint32, nsids)
			for j := range g.NSIDs {
				g.NSIDs[j] = le.Uint32(b[off:])
				off += ANANSIDSize
			}
		}
		l.Groups = append(l.Groups, g)
	}
	return l, nil
}
