package daemon

import (
	"fmt"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// Each gateway group has a RADOS client of its own, for its lease, its
// standby announcements and its namespaces' images: a blocklist entry
// fences one group, and a slow placement group on one lease object holds
// up one group's calls, not the daemon's. The other rbd namespaces share
// one client.

// gatewayClient is the backend.RBDOptions.Client of group's namespaces:
// one of its own in a gateway group, "" (the shared one) outside.
func gatewayClient(g *config.Gateway, group uint32) string {
	if !g.HasGroup(group) {
		return ""
	}
	return fmt.Sprintf("gateway ANA group %d", group)
}

// gatewayRados is how the gateway reaches its pool: through the client
// named (a group's own, or "" for the daemon's shared one).
func gatewayRados(g *config.Gateway, client string) backend.RBDOptions {
	return backend.RBDOptions{Pool: g.Pool, Namespace: g.RadosNamespace, Conf: g.Ceph.Conf, User: g.Ceph.User, Keyring: g.Ceph.Keyring, Client: client}
}

// rebuilder is group's Runner.Rebuild: its client was blocklisted, and
// the group is inaccessible here. The old client is retired, so that the
// next open connects a new instance (a new global id, which the blocklist
// entry does not name); the lease opens on it; the group's images are
// reopened on it once their commands in flight have completed (or failed
// with the path status: the OSDs refuse the old client at once); then the
// store takes the new lease, and the old one closes, shutting the old
// client down with its last user. i is the group's index in gs.leases.
func (gs *gatewaySet) rebuilder(t *fabrics.Target, i int, o backend.RBDOptions, lease time.Duration, log *logrus.Entry) func(uint32) error {
	return func(group uint32) error {
		started := time.Now()
		backend.RetireClient(o)
		store := gs.stores[i]
		object := gs.cfg.LeaseObject(group)
		nl, err := backend.OpenRadosLease(o, object, gs.cookie, lease)
		if err != nil {
			return err
		}
		if err := t.ReopenANAGroup(group, lease); err != nil {
			nl.Close()
			return err
		}
		old := gs.leases[i]
		store.replace(nl)
		gs.leases[i] = nl
		old.Close()
		log.WithFields(logrus.Fields{"ana_group": group, "took": time.Since(started).Round(time.Millisecond).String()}).Info("gateway ANA group: a new RADOS client, the lease and images reopened on it")
		return nil
	}
}

// replace makes l the store's lease object: the group's new client. The
// standby announcements reopen on it when next used. Called by the
// lease's ops only (the rebuild), one at a time.
func (s *radosStore) replace(l leaseObject) {
	s.closeStandbys()
	s.l = l
	s.watching = false
	s.self = ""
}
