package fabrics

import (
	"fmt"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
)

// ReopenANAGroup reopens the backends of group g's namespaces on a new
// cluster client (backend.Reconnecter; the others are left alone), once
// no command on them is in flight: a gateway's RADOS client for the group
// was blocklisted and retired. The caller made the group inaccessible
// first (PinANAGroup), so no command starts on it meanwhile; commands in
// flight on the old client fail fast with the path status. Namespaces of
// other groups are not waited for nor touched. An error names the
// namespace whose commands did not finish within timeout or whose reopen
// failed; the caller tries again later.
func (t *Target) ReopenANAGroup(g uint32, timeout time.Duration) error {
	members, err := t.drainANAGroup(g, timeout)
	if err != nil {
		return err
	}
	for _, m := range members {
		r, ok := m.ns.Backend.(backend.Reconnecter)
		if !ok || !m.ns.hold() {
			continue // removed meanwhile: its removal closes the old one
		}
		err := r.Reconnect()
		if err == nil {
			// The old client is blocklisted (a reopen follows a fence):
			// its writes that timed out can no longer land.
			m.ns.unsettled.Store(0)
		}
		m.ns.unhold()
		if err != nil {
			return fmt.Errorf("subsystem %s namespace %d: reopen: %w", m.nqn, m.ns.ID, err)
		}
	}
	return nil
}
