package vblock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A block names itself, so that a read tells which write it came from:
//
//	[0:8)     magic "nvmfvbk1"
//	[8:16)    block number, little endian
//	[16:24)   counter of the write, little endian (from 1)
//	[24:n-4)  bytes derived from block and counter
//	[n-4:n)   CRC-32C of every other byte of the block
const (
	magic      = "nvmfvbk1"
	offBlock   = 8
	offCounter = 16
	offFill    = 24

	// MinBlockSize is the smallest block the format fits in.
	MinBlockSize = 512
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode fills b with write counter of block. len(b) is the block size.
func Encode(b []byte, block, counter uint64) {
	copy(b, magic)
	binary.LittleEndian.PutUint64(b[offBlock:], block)
	binary.LittleEndian.PutUint64(b[offCounter:], counter)
	// xorshift64: distinct fill for every (block, counter), so a block
	// stitched from two writes fails the checksum.
	x := block*0x9e3779b97f4a7c15 ^ counter ^ 0x5bd1e9955bd1e995
	end := len(b) - 4
	for i := offFill; i < end; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		copy(b[i:end], w[:])
	}
	binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[:end], castagnoli))
}

// ErrForeign is a block that is neither zeros nor one whole write:
// torn, corrupted, or another program's.
var ErrForeign = errors.New("neither zeros nor one whole write (torn or foreign bytes)")

// Decode tells which write b holds: its block number and counter, or
// counter 0 for a block of zeros (never written).
func Decode(b []byte) (block, counter uint64, err error) {
	end := len(b) - 4
	if len(b) >= MinBlockSize && string(b[:len(magic)]) == magic &&
		binary.LittleEndian.Uint32(b[end:]) == crc32.Checksum(b[:end], castagnoli) {
		return binary.LittleEndian.Uint64(b[offBlock:]), binary.LittleEndian.Uint64(b[offCounter:]), nil
	}
	for _, c := range b {
		if c != 0 {
			return 0, 0, ErrForeign
		}
	}
	return 0, 0, nil
}

// CheckBlock checks what block n of the device holds (b) against its
// ledger entry e: its newest acknowledged version, or, when a write was in
// flight and unacknowledged (e.Pending), that one.
func CheckBlock(b []byte, n uint64, e Entry) error {
	block, counter, err := Decode(b)
	switch {
	case err != nil:
		return fmt.Errorf("block %d: %w; newest acknowledged version %d", n, err, e.Acked)
	case counter == 0 && e.Acked == 0:
		return nil
	case counter == 0:
		return fmt.Errorf("block %d: zeros, but version %d was acknowledged", n, e.Acked)
	case block != n:
		return fmt.Errorf("block %d: holds block %d's version %d (misdirected write)", n, block, counter)
	case counter == e.Acked, e.Pending != 0 && counter == e.Pending:
		return nil
	case counter < e.Acked:
		return fmt.Errorf("block %d: holds version %d, older than the newest acknowledged %d (lost or reordered write)",
			n, counter, e.Acked)
	default:
		return fmt.Errorf("block %d: holds version %d, never written or not the newest (acknowledged %d, in flight %d)",
			n, counter, e.Acked, e.Pending)
	}
}
