package fabrics

import "fmt"

// ReloadANAGroupReservations reads the reservation state of every
// namespace of group g from its store and publishes it (ReloadReservation):
// a gateway that takes the group over enforces what the previous owner
// stored, before the group turns optimized here. An error names the
// namespace whose state could not be read; the group must not be served.
func (t *Target) ReloadANAGroupReservations(g uint32) error {
	t.mu.Lock()
	subs := t.subsystemsLocked()
	t.mu.Unlock()
	for _, s := range subs {
		for _, id := range s.NamespaceIDs() {
			ns := s.Namespace(id)
			if ns == nil || ns.ANAGroup() != g || !ns.hold() {
				continue // removed meanwhile: nothing to serve
			}
			err := ns.ReloadReservation()
			ns.unhold()
			if err != nil {
				return fmt.Errorf("subsystem %s namespace %d: reading the reservation state: %w", s.NQN, id, err)
			}
		}
	}
	return nil
}
