package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// The gateway pair: the daemon's side of the ANA group leases (package
// gateway). Each gateway group is pinned on every port (fabrics'
// PinANAGroup): inaccessible from before the first port opens, optimized
// while this daemon holds the group's lease, inaccessible again the moment
// it steps down.

// gatewaySet is the running gateway: one lease runner per group.
type gatewaySet struct {
	cfg     config.Gateway
	name    string
	cookie  string
	runners []*gateway.Runner
	leases  []*backend.RadosLease
	stores  []*radosStore
	cancel  context.CancelFunc
	// With balancing: the gateways up, and the pace of this one's moves.
	members      *gateway.Members
	membersLease *backend.RadosLease
	moves        *gateway.Moves
}

// runningGateway is the daemon's gateway for the metrics; nil if none.
var runningGateway atomic.Pointer[gatewaySet]

// gatewayStatuses is each group runner's status for the metrics.
func gatewayStatuses() []gateway.Status {
	gs := runningGateway.Load()
	if gs == nil {
		return nil
	}
	st := make([]gateway.Status, 0, len(gs.runners))
	for _, r := range gs.runners {
		st = append(st, r.Status())
	}
	return st
}

// pinGatewayGroups makes the gateway groups inaccessible on every port,
// present and future, before the daemon opens any: no host sees this
// daemon optimized for a group before it holds the group's lease.
func pinGatewayGroups(t *fabrics.Target, g *config.Gateway) error {
	if g == nil {
		return nil
	}
	for _, grp := range g.GroupIDs() {
		if err := t.PinANAGroup(grp, nvme.ANAInaccessible); err != nil {
			return fmt.Errorf("gateway.groups: %w", err)
		}
	}
	return nil
}

// startGateway opens a lease per group, on the cluster connection the
// groups' rbd namespaces use, and starts running them.
func startGateway(t *fabrics.Target, g *config.Gateway, log *logrus.Entry) (*gatewaySet, error) {
	if g == nil {
		return nil, nil
	}
	gs := &gatewaySet{cfg: *g, name: g.Name}
	gs.cfg.Groups = slices.Clone(g.Groups)
	if gs.name == "" {
		gs.name, _ = os.Hostname()
	}
	// A cookie of its own for each run of the daemon: a restarted daemon
	// is a new holder, never mistaken for its previous run.
	var nonce [6]byte
	rand.Read(nonce[:])
	gs.cookie = gs.name + "." + hex.EncodeToString(nonce[:])
	timing := gateway.DefaultTiming(time.Duration(g.LeaseSeconds) * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	gs.cancel = cancel
	log = log.WithField("gateway", gs.name)
	if err := gs.openMembers(g, timing, log); err != nil {
		gs.close()
		return nil, err
	}
	for _, grp := range g.GroupIDs() {
		o := gatewayRados(g, gatewayClient(g, grp))
		lease, err := backend.OpenRadosLease(o, g.LeaseObject(grp), gs.cookie, timing.Lease)
		if err != nil {
			gs.close()
			return nil, fmt.Errorf("gateway: ANA group %d: %w", grp, err)
		}
		gs.leases = append(gs.leases, lease)
		store := &radosStore{l: lease, standbyObject: func(name string) (standbyObject, error) {
			// A standby announcement lasts two tries: one missed is not
			// a gateway gone.
			return backend.OpenRadosLease(o, g.LeaseObject(grp)+".standby."+name, gs.cookie, 2*timing.Renew)
		}}
		gs.stores = append(gs.stores, store)
		r := gs.newRunner(t, g, grp, store, timing, o, log)
		store.poke = func() {
			log.WithField("ana_group", r.Lease.Group).Info("gateway lease object notified (a release): trying the lease now")
			r.Poke()
		}
		gs.runners = append(gs.runners, r)
	}
	// A namespace's I/O that finds the client blocklisted steps its
	// group down at once, before the next lock call would.
	t.SetFencedHook(func(group uint32) {
		if r := gs.runner(group); r != nil {
			r.Fenced()
		}
	})
	if gs.members != nil {
		gs.members.Start(ctx)
	}
	for _, r := range gs.runners {
		r.Start(ctx)
	}
	log.WithFields(logrus.Fields{"groups": g.GroupIDs(), "pool": g.Pool, "lease_seconds": g.LeaseSeconds, "cookie": gs.cookie}).Info("gateway started: ANA groups inaccessible here until this daemon holds their lease")
	runningGateway.Store(gs)
	return gs, nil
}

// newRunner is group grp's lease runner, on store.
func (gs *gatewaySet) newRunner(t *fabrics.Target, g *config.Gateway, grp uint32, store *radosStore, timing gateway.Timing,
	o backend.RBDOptions, log *logrus.Entry) *gateway.Runner {
	gl := &gateway.Lease{Group: grp, Timing: timing, Wall: time.Now, Name: gs.name, Preferred: g.Preferred(grp)}
	if g.FailbackDelay > 0 { // -1: never
		gl.Failback = time.Duration(g.FailbackDelay) * time.Second
	}
	var preferredOf func(uint32) string
	if slices.Contains(g.BalancedGroups(), grp) {
		preferredOf, gl.Moves = gs.members.Preferred, gs.moves
	}
	return &gateway.Runner{
		PreferredOf: preferredOf,
		Lease:       gl,
		Store:       store,
		Me:          gateway.Holder{Name: gs.name, Cookie: gs.cookie},
		Log:         log,
		Now:         boottime,
		// A release hands the group over only once the writes this
		// daemon took for it are on the cluster.
		Quiesce: t.QuiesceANAGroup,
		Rebuild: gs.rebuilder(t, len(gs.leases)-1, o, timing.Lease, log),
		// A new owner enforces the reservations its predecessor stored.
		Ready: t.ReloadANAGroupReservations,
		// Failback only to a gateway that serves the same namespaces.
		Namespaces: func(group uint32) string { return namespacesDigest(t.ANAGroupNamespaces(group)) },
		Publish: func(group uint32, st gateway.State) {
			ana := nvme.ANAInaccessible
			if st == gateway.Owner {
				ana = nvme.ANAOptimized
			}
			if err := t.PinANAGroup(group, ana); err != nil {
				log.WithError(err).WithField("ana_group", group).Error("gateway: setting the ANA state")
			}
		},
	}
}

// namespacesDigest is a short digest of an ANA group's namespaces
// (fabrics' ANAGroupNamespaces), for the preferred gateway's announcement.
func namespacesDigest(names []string) string {
	sum := sha256.Sum256([]byte(strings.Join(names, "\n")))
	return hex.EncodeToString(sum[:8])
}

// stop releases the groups this daemon owns, so a peer takes them at
// once, and ends the leases. Called before the backends close.
func (gs *gatewaySet) stop(timeout time.Duration) {
	if gs == nil {
		return
	}
	for _, r := range gs.runners {
		r.ReleaseAndWait(timeout)
	}
	gs.cancel()
	// A call in flight (bounded by the client's timeouts) must return
	// before its lease is closed.
	for _, r := range gs.runners {
		r.Wait()
	}
	if gs.members != nil {
		gs.members.Wait() // it left the members
	}
	gs.close()
	runningGateway.CompareAndSwap(gs, nil)
}

func (gs *gatewaySet) close() {
	gs.cancel()
	for _, s := range gs.stores {
		s.closeStandbys()
	}
	gs.stores = nil
	for _, l := range gs.leases {
		l.Close()
	}
	gs.leases = nil
	if gs.membersLease != nil {
		gs.membersLease.Close()
		gs.membersLease = nil
	}
}

func (gs *gatewaySet) runner(group uint32) *gateway.Runner {
	for _, r := range gs.runners {
		if r.Lease.Group == group {
			return r
		}
	}
	return nil
}

// boottime reads CLOCK_BOOTTIME, which goes on while the machine is
// suspended, as the lock's expiry on the OSD does.
func boottime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("CLOCK_BOOTTIME: " + err.Error()) // Linux has it since 2.6.39
	}
	return time.Duration(ts.Nano())
}

// leaseObject is a backend.RadosLease, as radosStore uses it.
type leaseObject interface {
	Lock(renew bool) error
	Unlock() error
	Holder() (string, error)
	SetHolder(v string) error
	Self() (string, error)
	Fence(addr string) error
	Watch(notified func()) error
	WatchError() error
	Unwatch()
	Notify() error
	Close()
}

// standbyObject is a gateway's standby announcement for one group: a
// lock of two tries' duration, with the announcing run's cookie recorded.
type standbyObject interface {
	Lock(renew bool) error
	Unlock() error
	Holder() (string, error)
	SetHolder(v string) error
	Close()
}

// radosStore is a gateway.Store on a RADOS lease: it maps librados'
// errors to the lease's, and watches the lease object once it exists so
// that a peer's release wakes the lease at once (poke). It is also the
// lease's gateway.Standbys, on objects of their own next to the lease's.
type radosStore struct {
	l    leaseObject
	poke func()
	// standbyObject opens name's standby announcement for the group.
	standbyObject func(name string) (standbyObject, error)
	// Only touched by the lease's ops, one at a time, and by close once
	// they have ended:
	watching bool
	self     string                   // this client's address, once known: it does not change
	standbys map[string]standbyObject // opened announcements by gateway name
}

// standby opens name's announcement once.
func (s *radosStore) standby(name string) (standbyObject, error) {
	if o := s.standbys[name]; o != nil {
		return o, nil
	}
	o, err := s.standbyObject(name)
	if err != nil {
		return nil, err
	}
	if s.standbys == nil {
		s.standbys = map[string]standbyObject{}
	}
	s.standbys[name] = o
	return o, nil
}

// Announce takes or extends me's announcement lock and records the run.
func (s *radosStore) Announce(me gateway.Holder, _ time.Duration) error {
	o, err := s.standby(me.Name)
	if err != nil {
		return err
	}
	if err := o.Lock(false); err != nil {
		return leaseError(err)
	}
	return leaseError(o.SetHolder(me.Announcement()))
}

// Announced reads the announcement recorded and whether its lock is still
// held: a lock call of ours that succeeds finds it lapsed (and gives it
// back at once); EBUSY is the announcing gateway holding it.
func (s *radosStore) Announced(name string) (string, error) {
	o, err := s.standby(name)
	if err != nil {
		return "", err
	}
	cookie, err := o.Holder()
	if err != nil || cookie == "" {
		return "", leaseError(err)
	}
	switch err := o.Lock(false); {
	case errors.Is(err, syscall.EBUSY):
		return cookie, nil
	case err != nil:
		return "", leaseError(err)
	}
	return "", leaseError(o.Unlock())
}

func (s *radosStore) closeStandbys() {
	for _, o := range s.standbys {
		o.Close()
	}
	s.standbys = nil
}

// leaseError maps a librados errno: ESHUTDOWN is librados' EBLOCKLISTED.
func leaseError(err error) error {
	if errors.Is(err, syscall.ESHUTDOWN) {
		return fmt.Errorf("%w (%v)", gateway.ErrBlocklisted, err)
	}
	return err
}

func (s *radosStore) Lock(renew bool) error {
	if s.watching {
		if err := s.l.WatchError(); err != nil {
			// A broken watch hears no notification: set it up again;
			// but one broken by a blocklist entry is the client fenced.
			s.l.Unwatch()
			s.watching = false
			if errors.Is(err, syscall.ESHUTDOWN) {
				return leaseError(err)
			}
		}
	}
	err := s.l.Lock(renew)
	if !s.watching && (err == nil || errors.Is(err, syscall.EBUSY)) {
		// The object exists now. Without a watch, the lease still tries
		// at every interval.
		s.watching = s.l.Watch(s.poke) == nil
	}
	switch {
	case err == nil:
		return nil
	case renew && (errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EBUSY)):
		return fmt.Errorf("%w (%v)", gateway.ErrLost, err)
	case errors.Is(err, syscall.EBUSY):
		return gateway.ErrBusy
	}
	return leaseError(err)
}

func (s *radosStore) Unlock() error { return leaseError(s.l.Unlock()) }

// The record is four lines: name, cookie, client address and the
// gateway a failback hands the group to (a record of three lines, from an
// older run, has none).
func (s *radosStore) Recorded() (gateway.Holder, error) {
	v, err := s.l.Holder()
	if err != nil || v == "" {
		return gateway.Holder{}, leaseError(err)
	}
	f := strings.SplitN(v, "\n", 4)
	for len(f) < 4 {
		f = append(f, "")
	}
	return gateway.Holder{Name: f[0], Cookie: f[1], Addr: f[2], Handover: f[3]}, nil
}

// Record's write op asserts our lock: EBUSY or ENOENT is a lock no
// longer ours.
func (s *radosStore) Record(h gateway.Holder) error {
	v := ""
	if h != (gateway.Holder{}) {
		v = h.Name + "\n" + h.Cookie + "\n" + h.Addr + "\n" + h.Handover
	}
	err := s.l.SetHolder(v)
	if errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%w (%v)", gateway.ErrLost, err)
	}
	return leaseError(err)
}

func (s *radosStore) Self() (string, error) {
	if s.self != "" {
		return s.self, nil
	}
	a, err := s.l.Self()
	if err != nil {
		return "", leaseError(err)
	}
	s.self = a
	return a, nil
}

func (s *radosStore) Fence(addr string) error { return leaseError(s.l.Fence(addr)) }

func (s *radosStore) Notify() error { return leaseError(s.l.Notify()) }

func gatewayEqual(a, b *config.Gateway) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.Pool == b.Pool && a.RadosNamespace == b.RadosNamespace && a.LeasePrefix == b.LeasePrefix &&
		a.LeaseSeconds == b.LeaseSeconds && a.FailbackDelay == b.FailbackDelay && a.Ceph == b.Ceph &&
		a.Balance == b.Balance && a.RebalanceSeconds == b.RebalanceSeconds && slices.Equal(a.Groups, b.Groups)
}
