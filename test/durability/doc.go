// Package durability checks end to end that a write the host was told is
// durable is durable.
//
// The target's backing device sits under Linux's dm-log-writes, which
// records every write in the order it reached stable media: a write
// without FUA is logged only when a cache flush covering it completes, a
// FUA write as soon as it completes, and a mark wherever user space asks
// for one (dmsetup message DEV 0 mark NAME). A writer on the host side
// (Writer) writes blocks that name themselves (block number, sequence
// number, checksum: see pattern.go), makes some of them durable with
// RWF_DSYNC writes (FUA on the wire) or with fdatasync (an NVMe Flush),
// leaves others unflushed, and after each durable point records what it was
// promised and sets a mark. Check then replays the log and, at every mark,
// compares what a power cut at that moment would have left on the media
// with what the writer was promised.
//
// ReadLog parses the log device (format in Linux
// drivers/md/dm-log-writes.c); Record is the writer's account; Verify reads
// a device back against a record when there was no log, as after a daemon
// killed under load. cmd/durability puts the three behind one command for
// the end-to-end scenarios.
package durability
