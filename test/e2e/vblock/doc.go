// Package vblock is the versioned-block workload of the gateway
// scenarios and the nemesis soak: a writer rewrites the same blocks of a
// block device, each write carrying its block number and a counter, and
// keeps a ledger of the newest counter the device acknowledged for each
// block; Verify reads the device back and checks that every block holds
// its newest acknowledged version. A write the device acknowledged and
// then lost, or an older write that landed after a newer one (two
// gateways writing in the wrong order), shows as a block holding an older
// counter than its ledger's.
//
// block.go is the on-disk format, ledger.go the ledger, its file and the
// check, all pure Go; writer_linux.go does the I/O (O_DIRECT, several
// writers at once); cmd/vblock puts them behind one command.
package vblock
