package daemon

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/dhchap"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/metrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp"
	"github.com/nvmeof-tgt/nvmeof-tgt/tlspsk"
	"github.com/sirupsen/logrus"
)

// The steps of change.commit, in the order it runs them, and abort, which
// undoes prepare instead.

// abort undoes prepare after a failure.
func (c *change) abort() {
	for _, o := range c.ready {
		closeUnused(o.ns, c.log)
	}
	for _, l := range c.listeners {
		l.Close(time.Second)
	}
}

// removeOld removes namespaces, subsystems and ports that go away, which
// disconnects the hosts using them. A "does not exist" from the target
// means it already lacks the item: the goal holds, so it is only logged.
func (c *change) removeOld() {
	for _, r := range c.plan.DelNamespaces {
		f := logrus.Fields{"subsystem": r.NQN, "nsid": r.NSID}
		if s := c.d.target.Subsystem(r.NQN); s == nil {
			c.log.WithFields(f).Warn("namespace to remove: its subsystem is not running")
		} else if err := s.RemoveNamespace(r.NSID); err != nil {
			c.log.WithFields(f).WithError(err).Warn("namespace to remove was not running")
		} else {
			c.log.WithFields(f).Info("namespace removed")
		}
	}
	for _, s := range c.plan.DelSubsystems {
		if err := c.d.target.RemoveSubsystem(s.NQN); err != nil {
			c.log.WithField("subsystem", s.NQN).WithError(err).Warn("subsystem to remove was not running")
		} else {
			c.log.WithField("subsystem", s.NQN).Info("subsystem removed")
		}
	}
	for _, pc := range c.plan.DelPorts {
		if l := c.d.listeners[pc.ID]; l != nil {
			l.Close(5 * time.Second)
			delete(c.d.listeners, pc.ID)
		}
		f := logrus.Fields{"port": pc.ID, "address": addrKey(pc)}
		if err := c.d.target.RemovePort(pc.ID); err != nil {
			c.log.WithFields(f).WithError(err).Warn("port to remove was not running")
		} else {
			c.log.WithFields(f).Info("port removed")
		}
	}
}

// addPorts registers the new ports with the target and keeps their
// listeners; a port that took over an address listens now that it is
// free.
func (c *change) addPorts() {
	for _, pc := range c.plan.AddPorts {
		// A port that cannot be set up stays in the running configuration,
		// which the subsystems' port lists keep valid; newChange adds it
		// again at every later change until it listens.
		fp := c.ports[pc.ID]
		l := c.listeners[pc.ID]
		if l == nil {
			var err error
			if l, err = openListener(c.d.target, fp, c.log); err != nil {
				c.problem(fmt.Errorf("%s: %w", portPath(c.next, pc.ID), err), nil)
				continue
			}
		}
		if err := c.d.target.AddPort(fp); err != nil {
			// The listener would accept for a port the target does not
			// know by these settings.
			l.Close(time.Second)
			c.problem(fmt.Errorf("%s: %w", portPath(c.next, pc.ID), err), nil)
			continue
		}
		c.d.listeners[pc.ID] = l
		c.setReferrals(pc)
	}
}

// updateReferrals gives kept ports their new referrals; discovery
// controllers connected through them hear of it.
func (c *change) updateReferrals() {
	for _, pc := range c.plan.ReferralPorts {
		c.setReferrals(pc)
		c.log.WithFields(logrus.Fields{"port": pc.ID, "referrals": len(pc.Referrals)}).Info("port referrals changed")
	}
}

func (c *change) setReferrals(pc config.Port) {
	refs := make([]fabrics.Referral, 0, len(pc.Referrals))
	for _, r := range pc.Referrals {
		// Validate parsed the address.
		refs = append(refs, fabrics.Referral{Transport: transportType(r.Transport), Address: netip.MustParseAddr(r.Address), ServiceID: r.Port})
	}
	if err := c.d.target.SetReferrals(pc.ID, refs); err != nil {
		c.problem(fmt.Errorf("%s.referrals: %w", portPath(c.next, pc.ID), err), nil)
	}
}

// addSubsystems creates the new subsystems, without namespaces yet.
func (c *change) addSubsystems() {
	for _, s := range c.plan.AddSubsystems {
		fs := fabrics.NewSubsystem(s.NQN, s.Serial, s.Model, false)
		c.setAuth(fs, s)
		fs.SetPorts(s.Ports)
		fs.SetLimits(s.MaxControllers, s.MaxIOQueues)
		err := fs.SetControllerIDs(s.CntlidRange())
		if err == nil {
			err = c.d.target.AddSubsystem(fs)
		}
		if err != nil {
			// Its namespaces, opened already, are closed by addNamespaces.
			c.refused[s.NQN] = true
			c.problem(fmt.Errorf("%s: %w", subPath(c.next, s.NQN), err), func(a *config.Config) {
				a.Subsystems = slices.DeleteFunc(a.Subsystems, func(x config.Subsystem) bool { return x.NQN == s.NQN })
			})
			continue
		}
		c.log.WithField("subsystem", s.NQN).Info("subsystem added")
	}
}

// resize changes namespace sizes in place and measures kept block devices
// again (they may have grown).
func (c *change) resize() {
	for _, r := range c.plan.ResizeNamespaces {
		ci, cj := findNS(c.cur, r.NQN, r.NSID)
		old := c.cur.Subsystems[ci].Namespaces[cj]
		keepOld := func(a *config.Config) {
			i, j := findNS(a, r.NQN, r.NSID)
			a.Subsystems[i].Namespaces[j] = old
		}
		s, err := c.subsystem(r.NQN)
		if err == nil {
			_, err = s.ResizeNamespace(r.NSID, int64(r.Size))
		}
		if err != nil {
			c.problem(fmt.Errorf("%s.size: %w", nsPath(c.next, r.NQN, r.NSID), err), keepOld)
			continue
		}
		c.log.WithFields(logrus.Fields{"subsystem": r.NQN, "nsid": r.NSID, "from": old.Size, "to": r.Size}).Info("namespace resized")
	}
	for _, r := range c.plan.Remeasure {
		f := logrus.Fields{"subsystem": r.NQN, "nsid": r.NSID}
		s, err := c.subsystem(r.NQN)
		changed := false
		if err == nil {
			changed, err = s.ResizeNamespace(r.NSID, 0)
		}
		if err != nil {
			// The namespace keeps serving at its old size; nothing in the
			// file asked for a change.
			c.log.WithError(err).WithFields(f).Warn("measuring the block device again failed")
		} else if changed {
			ns := s.Namespace(r.NSID)
			c.log.WithFields(f).WithField("bytes", ns.Blocks()<<ns.BlockShift).Info("block device size changed; namespace resized")
		}
	}
}

// retune changes who may connect, the limits and the port links of kept
// subsystems, and the target's queue-pair ceiling.
func (c *change) retune() {
	for _, s := range c.plan.Access {
		if fs := c.keptSubsystem(s.NQN); fs != nil {
			c.setAuth(fs, s)
			c.log.WithFields(logrus.Fields{"subsystem": s.NQN, "allow_any_host": s.AllowAnyHost, "hosts": len(s.Hosts)}).Info("subsystem access changed")
		}
	}
	for _, s := range c.plan.Limits {
		if fs := c.keptSubsystem(s.NQN); fs != nil {
			fs.SetLimits(s.MaxControllers, s.MaxIOQueues)
			lo, hi := s.CntlidRange()
			if err := fs.SetControllerIDs(lo, hi); err != nil {
				// Validate checked the range; the target disagreeing is a bug.
				c.problem(fmt.Errorf("%s.cntlid_min: %w", subPath(c.next, s.NQN), err), nil)
			}
			c.log.WithFields(logrus.Fields{"subsystem": s.NQN, "max_controllers": s.MaxControllers, "max_io_queues": s.MaxIOQueues,
				"cntlid_min": lo, "cntlid_max": hi}).Info("subsystem limits changed; connected controllers keep what they have")
		}
	}
	c.d.target.SetQueuePairCaps(c.next.Limits.UnconnectedPerAddress, c.next.Limits.QueuePairsPerHost)
	if _, limit := c.d.target.QueuePairs(); limit != c.next.Limits.MaxQueuePairs {
		c.d.target.SetMaxQueuePairs(c.next.Limits.MaxQueuePairs)
		raiseThreadLimit(c.next.Limits.MaxQueuePairs)
		if limit != 0 {
			c.log.WithFields(logrus.Fields{"from": limit, "to": c.next.Limits.MaxQueuePairs}).Info("limits.max_queue_pairs changed; queue pairs already connected stay")
		}
	}
	for _, s := range c.plan.Links {
		if fs := c.keptSubsystem(s.NQN); fs != nil {
			fs.LinkPorts(s.Ports)
			c.log.WithFields(logrus.Fields{"subsystem": s.NQN, "ports": s.Ports}).Info("subsystem ports changed")
		}
	}
}

// setANA applies new ANA states of kept ports and moves kept namespaces
// to their new ANA groups, in place: hosts keep their connections and get
// an ANA change event. The target logs each change.
func (c *change) setANA() {
	for _, pc := range c.plan.ANAPorts {
		if err := c.d.target.SetANAStates(pc.ID, anaStates(pc)); err != nil {
			old := c.cur.Ports[slices.IndexFunc(c.cur.Ports, func(p config.Port) bool { return p.ID == pc.ID })].ANA
			c.problem(fmt.Errorf("%s.ana: %w", portPath(c.next, pc.ID), err), func(a *config.Config) {
				a.Ports[slices.IndexFunc(a.Ports, func(p config.Port) bool { return p.ID == pc.ID })].ANA = maps.Clone(old)
			})
		}
	}
	for _, r := range c.plan.Reservations {
		if s, err := c.subsystem(r.NQN); err == nil {
			if ns := s.Namespace(r.NSID); ns != nil {
				if err := ns.SetReservations(r.Reservations.On()); err != nil {
					ci, cj := findNS(c.cur, r.NQN, r.NSID)
					old := c.cur.Subsystems[ci].Namespaces[cj].Reservations
					c.problem(err, func(a *config.Config) {
						if ai, aj := findNS(a, r.NQN, r.NSID); ai >= 0 && aj >= 0 {
							a.Subsystems[ai].Namespaces[aj].Reservations = old
						}
					})
				}
			}
		}
	}
	for _, r := range c.plan.Regroup {
		s, err := c.subsystem(r.NQN)
		if err == nil {
			err = s.SetANAGroup(r.NSID, r.Group())
		}
		if err != nil {
			ci, cj := findNS(c.cur, r.NQN, r.NSID)
			old := c.cur.Subsystems[ci].Namespaces[cj].ANAGroup
			c.problem(fmt.Errorf("%s.ana_group: %w", nsPath(c.next, r.NQN, r.NSID), err), func(a *config.Config) {
				i, j := findNS(a, r.NQN, r.NSID)
				a.Subsystems[i].Namespaces[j].ANAGroup = old
			})
		}
	}
}

// addNamespaces opens the backends that waited for their predecessor to
// close and adds every new namespace to its subsystem.
func (c *change) addNamespaces() {
	for _, r := range c.later {
		ns, err := openNamespace(r.NQN, r.Namespace, c.next.Gateway, c.d.resvDir, c.d.log)
		if err != nil {
			c.problem(fmt.Errorf("%s: %w", nsPath(c.next, r.NQN, r.NSID), err), func(a *config.Config) {
				i, j := findNS(a, r.NQN, r.NSID)
				a.Subsystems[i].Namespaces = slices.Delete(a.Subsystems[i].Namespaces, j, j+1)
			})
			continue
		}
		c.ready = append(c.ready, openedNamespace{r.NQN, ns})
	}
	for _, o := range c.ready {
		s := c.d.target.Subsystem(o.nqn)
		if s == nil || c.refused[o.nqn] {
			// Its subsystem was refused: a problem addSubsystems named.
			closeUnused(o.ns, c.log)
			continue
		}
		if err := s.AddNamespace(o.ns); err != nil {
			closeUnused(o.ns, c.log)
			c.problem(fmt.Errorf("%s: %w", nsPath(c.next, o.nqn, o.ns.ID), err), func(a *config.Config) {
				i, j := findNS(a, o.nqn, o.ns.ID)
				a.Subsystems[i].Namespaces = slices.Delete(a.Subsystems[i].Namespaces, j, j+1)
			})
			continue
		}
		c.log.WithFields(logrus.Fields{"subsystem": o.nqn, "nsid": o.ns.ID}).Info("namespace added")
	}
}

// applyDaemonSettings applies logging and the metrics address; the admin
// socket and the state file keep their paths until a restart.
func (c *change) applyDaemonSettings() {
	if c.next.Log != c.cur.Log {
		ConfigureLogger(c.d.logger, c.next.Log)
	}
	if c.next.Metrics.Address != c.cur.Metrics.Address {
		if c.d.metrics != nil {
			c.d.metrics.Close()
			c.d.metrics = nil
		}
		if addr := c.next.Metrics.Address; addr != "" {
			m, err := metrics.Serve(addr, &metrics.Collector{Target: c.d.target, Version: Version, Generation: c.d.Generation, Gateways: gatewayStatuses, Group: c.d.groupView}, c.log)
			if err != nil {
				c.problem(err, func(a *config.Config) { a.Metrics.Address = "" })
			} else {
				c.d.metrics = m
			}
		}
	}
	if c.next.Control.Socket != c.cur.Control.Socket && c.cur.Control.Socket != "" {
		c.log.WithField("socket", c.cur.Control.Socket).Warn("control.socket: the new admin socket path takes effect at restart")
		c.applied.Control.Socket = c.cur.Control.Socket
	}
	if !c.next.RDMA.Equal(c.cur.RDMA) {
		c.log.Warn("rdma: buffer pool, shared receive queue and poller CPUs are set up at start; the change takes effect at restart")
		c.applied.RDMA = c.cur.RDMA
	}
	if c.next.TCP.BufferPool != c.cur.TCP.BufferPool && c.cur.TCP.BufferPool != 0 {
		c.log.WithField("buffer_pool", int64(c.cur.TCP.BufferPool)).Warn("tcp.buffer_pool: the TCP buffer pool is sized at start; the change takes effect at restart")
		c.applied.TCP.BufferPool = c.cur.TCP.BufferPool
	}
	if n := c.next.TCP.DataTimeoutSeconds; n != c.cur.TCP.DataTimeoutSeconds {
		setTCPDataTimeout(n)
		c.log.WithField("data_timeout", tcp.DataTimeout().String()).Info("tcp.data_timeout_seconds changed: it applies to connections stalled from now on")
	}
	if c.next.IOEngine != c.cur.IOEngine && c.cur.IOEngine != "" {
		c.log.WithField("io_engine", c.cur.IOEngine).Warn("io_engine: the new engine takes effect at restart")
		c.applied.IOEngine = c.cur.IOEngine
	}
	if !gatewayEqual(c.next.Gateway, c.cur.Gateway) {
		c.log.Warn("gateway: the gateway block is read at start; the change takes effect at restart")
		c.applied.Gateway = c.cur.Gateway
	}
	if c.next.StateFile != c.cur.StateFile && c.cur.StateFile != "" {
		c.log.WithField("state_file", c.cur.StateFile).Warn("state_file: the new path takes effect at restart")
		c.applied.StateFile = c.cur.StateFile
	}
}

// subsystem returns kept subsystem nqn. The plan only names subsystems of the
// running configuration, so an error means the target and the
// configuration disagree.
func (c *change) subsystem(nqn string) (*fabrics.Subsystem, error) {
	if s := c.d.target.Subsystem(nqn); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("subsystem %s is not running", nqn)
}

// keptSubsystem is subsystem for a change that has nothing to undo in the
// configuration: a missing subsystem is a problem to report.
func (c *change) keptSubsystem(nqn string) *fabrics.Subsystem {
	s, err := c.subsystem(nqn)
	if err != nil {
		c.problem(fmt.Errorf("%s: %w", subPath(c.next, nqn), err), nil)
	}
	return s
}

// closeUnused closes a backend that never served a command, so there is
// nothing to flush; a failure is logged, as the close cannot be retried.
func closeUnused(ns *fabrics.Namespace, log *logrus.Entry) {
	ns.CloseReservationStore(log.WithField("nsid", ns.ID))
	if err := ns.Backend.Close(); err != nil {
		log.WithError(err).WithField("nsid", ns.ID).Warn("closing a backend that was opened but not used failed")
	}
}

// readHostSecrets reads a host's secrets; tests replace it to act while
// key files are being read.
var readHostSecrets = config.Host.Secrets

// setAuth gives the subsystem who may connect, their secrets and its hash
// and group lists. Every key file is read before anything changes, and the
// allow-list and the secrets change together, so a host being added with a
// secret is never allowed without it. Validation read the secrets a moment
// ago; a host whose secret cannot be read now (a key file removed since)
// is refused outright, allow_any_host or not, until a change reads it: the
// problem is reported, and its connects are counted as
// host_key_unreadable.
func (c *change) setAuth(fs *fabrics.Subsystem, s config.Subsystem) {
	keys := map[string]fabrics.HostKeys{}
	var refused []string
	for j, h := range s.Hosts {
		if !h.HasKey() && !h.HasTLSKey() {
			continue
		}
		host, ctrl, err := readHostSecrets(h)
		var psk *tlspsk.ConfiguredPSK
		var d tlspsk.Derivation
		if err == nil {
			if psk, d, err = h.TLSPSK(); err != nil {
				host.Clear()
				ctrl.Clear()
			}
		}
		if err != nil {
			c.problem(fmt.Errorf("%s.hosts[%d].%w", subPath(c.next, s.NQN), j, err), nil)
			c.log.WithFields(logrus.Fields{"subsystem": s.NQN, "host": h.NQN}).Warn("the host's secret cannot be read; refusing the host until it can")
			refused = append(refused, h.NQN)
			continue
		}
		keys[h.NQN] = fabrics.HostKeys{Host: host, Ctrl: ctrl, Policy: authPolicy(h.DHCHAPHashes, h.DHCHAPDHGroups),
			TLS: psk, TLSDerivation: d}
	}
	fs.SetAuthPolicy(authPolicy(s.DHCHAPHashes, s.DHCHAPDHGroups))
	fs.SetAccess(fabrics.Access{AllowAnyHost: s.AllowAnyHost, Hosts: s.HostNQNs(), Keys: keys, Refused: refused})
}

// authPolicy turns validated hash and group names into IDs; no names is
// no restriction.
func authPolicy(hashes, groups []string) fabrics.AuthPolicy {
	var pol fabrics.AuthPolicy
	for _, n := range hashes {
		pol.Hashes = append(pol.Hashes, dhchap.HashByName(n))
	}
	for _, n := range groups {
		id, _ := dhchap.GroupByName(n)
		pol.DHGroups = append(pol.DHGroups, id)
	}
	return pol
}
