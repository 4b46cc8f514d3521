package fabrics

import "fmt"

// ReloadANAGroupReservations reads the reservation state of every
// namespace of group g from its store and publishes it (ReloadReservation):
// a gateway that takes the group over enforces what the previous owner
// stored, before the group turns optimized here. An error names the
// namespace whose state could not be read; the group must not be served.
func (t *Target) ReloadANAGroupReservations(g uint32) error {
	for _, m := range t.anaGroupMembers(g) {
		if !m.ns.hold() {
			continue // removed meanwhile: nothing to serve
		}
		err := m.ns.ReloadReservation()
		m.ns.unhold()
		if err != nil {
			return fmt.Errorf("subsystem %s namespace %d: reading the reservation state: %w", m.nqn, m.ns.ID, err)
		}
	}
	return nil
}
