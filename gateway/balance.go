package gateway

import (
	"context"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// Balancing: with gateway.balance, the groups without a preferred gateway
// named in the configuration are spread over the gateways that are up,
// each preferred for about K/N of the K groups. Every gateway computes the
// same assignment from the same list of members, so no one decides it: a
// member holds a shared lock on the group's membership object, renewed at
// the lease's interval, and the lock's holders are the members. The
// assignment only names each group's preferred gateway; the group moves
// by failback, a planned release to a preferred gateway that stands by,
// ready, so the lease still decides the owner and every move is drained
// or fenced like any other.

// Assign spreads groups over members: each group goes to the member that
// ranks it highest (rendezvous hashing on the member's name and the group)
// among those with room left, the groups taken in ascending order: each
// member gets K/N groups, and K mod N of them one more. The same members give the same assignment on every
// gateway; a member leaving moves its groups and few others.
func Assign(members []string, groups []uint32) map[uint32]string {
	out := map[uint32]string{}
	if len(members) == 0 {
		return out
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	gs := slices.Clone(groups)
	slices.Sort(gs)
	// K/N each, and K mod N of them one more.
	lo, extra := len(gs)/len(ms), len(gs)%len(ms)
	load, atHi := map[string]int{}, 0
	for _, g := range gs {
		best, bestRank := "", uint64(0)
		for _, m := range ms {
			if load[m] >= lo && (load[m] > lo || atHi >= extra) {
				continue
			}
			if r := rank(m, g); best == "" || r > bestRank {
				best, bestRank = m, r
			}
		}
		out[g] = best
		if load[best]++; load[best] > lo {
			atHi++
		}
	}
	return out
}

// rank is member's rendezvous weight for group.
func rank(member string, group uint32) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0, byte(group >> 24), byte(group >> 16), byte(group >> 8), byte(group)})
	return h.Sum64()
}

// MemberStore is the group's membership object.
type MemberStore interface {
	// Join takes or extends this gateway's share of the object's lock,
	// for the lease's duration.
	Join() error
	// Leave gives it up, so the others see this gateway gone at once.
	Leave() error
	// Members are the names of the gateways holding a share now.
	Members() ([]string, error)
}

// Members keeps the list of gateways that are up and the assignment of
// the balanced groups over them.
type Members struct {
	Store    MemberStore
	Name     string        // this gateway's, always counted among the members while it runs
	Groups   []uint32      // the balanced groups
	Interval time.Duration // how often to renew the share and read the list
	Log      *logrus.Entry

	mu       sync.Mutex
	members  []string // sorted; nil until the first read
	assigned map[uint32]string
	lastErr  error
	done     chan struct{}
}

// Preferred is the gateway group is assigned to, "" while the members are
// not known (no failback then).
func (m *Members) Preferred(group uint32) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.assigned[group]
}

// List is the members last read.
func (m *Members) List() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// Start joins and keeps the membership current until ctx ends; then it
// leaves. Wait waits for that.
func (m *Members) Start(ctx context.Context) {
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		t := time.NewTicker(m.Interval)
		defer t.Stop()
		for {
			m.Refresh()
			select {
			case <-ctx.Done():
				if err := m.Store.Leave(); err != nil {
					m.Log.WithError(err).Warn("gateway: leaving the members")
				}
				return
			case <-t.C:
			}
		}
	}()
}

// Wait waits for Start's loop to have left.
func (m *Members) Wait() {
	if m.done != nil {
		<-m.done
	}
}

// Refresh renews this gateway's share and reads the members once. A read
// that fails keeps the last list: the leases, not the list, keep the
// groups safe, and a failback needs the preferred gateway standing by.
func (m *Members) Refresh() {
	err := m.Store.Join()
	var names []string
	if err == nil {
		names, err = m.Store.Members()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if (err != nil) != (m.lastErr != nil) {
		if err != nil {
			m.Log.WithError(err).Warn("gateway: the members of the group cannot be read; balancing keeps the last list")
		} else {
			m.Log.Info("gateway: the members of the group read again")
		}
	}
	m.lastErr = err
	if err != nil {
		return
	}
	names = append(names, m.Name)
	slices.Sort(names)
	names = slices.Compact(names)
	if m.members != nil && slices.Equal(names, m.members) {
		return
	}
	m.members = names
	m.assigned = Assign(names, m.Groups)
	m.Log.WithFields(logrus.Fields{"members": names, "preferred": m.assigned}).Info("gateway: the group's members changed; the balanced ANA groups' preferred gateways follow")
}

// Moves spaces out one gateway's failbacks: at most one group handed over
// per Period, so that a gateway joining a group of many does not move
// them all at once (each move makes its group inaccessible for a moment).
// The leases of one gateway share it; nil spaces nothing.
type Moves struct {
	Period time.Duration

	mu   sync.Mutex
	last time.Duration
	any  bool
}

// due is when the next failback may start.
func (m *Moves) due() time.Duration {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.any {
		return 0
	}
	return m.last + m.Period
}

// take counts a failback starting at now, if one may.
func (m *Moves) take(now time.Duration) bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.any && now < m.last+m.Period {
		return false
	}
	m.last, m.any = now, true
	return true
}
