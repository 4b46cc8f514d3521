// Package gateway runs the ANA group leases of a gateway pair: two or more
// daemons export the same images in one subsystem, and for each ANA group
// exactly one of them, the holder of the group's lease in RADOS, reports
// the group optimized; the others report it inaccessible.
//
// A lease is an exclusive RADOS lock with a duration on one object per
// group, renewed well inside its duration. The object also records the
// owner's client address, so that whoever takes the lease after it expired
// first fences the old owner (an OSD blocklist entry for its client):
// writes the old owner still has in flight are then refused by the OSDs
// instead of landing after the new owner's. An owner that cannot renew
// steps down at a local deadline, measured on the monotonic clock from the
// start of its last successful lock call and shorter than the lease, so it
// is inaccessible before anyone else can take the lock. The deadline is
// checked on CLOCK_BOOTTIME and on the wall clock, and passed when either
// says so: CLOCK_MONOTONIC stops while the machine is suspended, and a
// paused VM's clocks may stand still, while the lock expires on the OSD.
//
// Lease is the state machine, with no goroutines and no clock of its own:
// Runner drives it with the real clock and a Store that talks to RADOS.
package gateway
