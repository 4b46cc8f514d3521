// Package sharedstate keeps the state a namespace's reservations persist
// in, above all the state daemons share, behind the store interfaces
// fabrics defines (fabrics.ReservationStore, SharedReservationStore,
// EnforcingStore):
//
//   - device.go: a block namespace with shared_reservations keeps its
//     record in the device's last 1 MiB, which both daemons of an HA pair
//     read and write, with heartbeats and a lease (docs/ha-and-gateways.md);
//   - image.go: an rbd namespace keeps it in its image's metadata, changed
//     by compare-and-set, shared by every gateway that exports the image;
//   - file.go: any other file or block namespace in a file of its own
//     beside the daemon's state file, so that PTPL survives a restart.
//
// SetupReservations picks the store for a namespace from its
// configuration. The package imports fabrics, backend and config, never
// the daemon's API.
package sharedstate
