package durability

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A block the writer writes names itself, so that whatever a device or a
// replay holds can be told apart: the right write, an older or newer one,
// another block's data, a torn mix, or nothing.
//
//	[0:8)   magic "nvmfdur1"
//	[8:16)  block number, little endian
//	[16:24) sequence number of the write, little endian (from 1)
//	[24:28) CRC-32C of every other byte of the block
//	[28:)   bytes derived from block and sequence number
const (
	patMagic = "nvmfdur1"
	patBlock = 8
	patSeq   = 16
	patCRC   = 24
	patFill  = 28

	// MinBlockSize is the smallest block a pattern fits in.
	MinBlockSize = 512
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FillBlock writes the pattern of write seq to block into b.
func FillBlock(b []byte, block int64, seq uint64) {
	copy(b, patMagic)
	binary.LittleEndian.PutUint64(b[patBlock:], uint64(block))
	binary.LittleEndian.PutUint64(b[patSeq:], seq)
	// xorshift64: cheap, and distinct for every (block, seq).
	x := uint64(block)*0x9e3779b97f4a7c15 ^ seq ^ 0x5bd1e9955bd1e995
	for i := patFill; i < len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		copy(b[i:], w[:])
	}
	binary.LittleEndian.PutUint32(b[patCRC:], blockCRC(b))
}

func blockCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[:patCRC])
	return crc32.Update(c, castagnoli, b[patFill:])
}

// Content is what a block holds, as far as the writer can tell.
type Content struct {
	Kind  ContentKind
	Block int64  // the block the data names, for Written
	Seq   uint64 // the write it came from, for Written
}

type ContentKind int

const (
	Zeros   ContentKind = iota // never written (or discarded)
	Written                    // one whole write of the writer
	Foreign                    // anything else: torn, another program's, corrupted
)

// ReadBlock tells what b holds.
func ReadBlock(b []byte) Content {
	if string(b[:len(patMagic)]) == patMagic &&
		binary.LittleEndian.Uint32(b[patCRC:]) == blockCRC(b) {
		return Content{Kind: Written, Block: int64(binary.LittleEndian.Uint64(b[patBlock:])),
			Seq: binary.LittleEndian.Uint64(b[patSeq:])}
	}
	for _, c := range b {
		if c != 0 {
			return Content{Kind: Foreign}
		}
	}
	return Content{Kind: Zeros}
}

func (c Content) String() string {
	switch c.Kind {
	case Zeros:
		return "zeros (never written)"
	case Written:
		return fmt.Sprintf("block %d seq %d", c.Block, c.Seq)
	default:
		return "bytes that are no whole write of this writer (torn or foreign)"
	}
}
