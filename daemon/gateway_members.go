package daemon

import (
	"fmt"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/sirupsen/logrus"
)

// openMembers, with balancing, joins the gateways of the group: a share
// of the lock on the members object, through the daemon's shared client
// (not a group's, which a fence blocklists: a fenced gateway is still up,
// and stands by again once rebuilt).
func (gs *gatewaySet) openMembers(g *config.Gateway, timing gateway.Timing, log *logrus.Entry) error {
	groups := g.BalancedGroups()
	if len(groups) == 0 {
		return nil
	}
	l, err := backend.OpenRadosLease(gatewayRados(g, ""), g.MembersObject(), gs.name, timing.Lease)
	if err != nil {
		return fmt.Errorf("gateway: members: %w", err)
	}
	gs.membersLease = l
	gs.moves = &gateway.Moves{Period: time.Duration(g.RebalanceSeconds) * time.Second}
	gs.members = &gateway.Members{Store: memberStore{l}, Name: gs.name, Groups: groups, Interval: timing.Renew, Log: log}
	return nil
}

// memberStore is a gateway.MemberStore on the members object's shared
// lock, under the gateway's name: a restarted gateway is the same member.
type memberStore struct{ l *backend.RadosLease }

func (m memberStore) Join() error                { return leaseError(m.l.LockShared()) }
func (m memberStore) Leave() error               { return leaseError(m.l.Unlock()) }
func (m memberStore) Members() ([]string, error) { n, err := m.l.Lockers(); return n, leaseError(err) }
