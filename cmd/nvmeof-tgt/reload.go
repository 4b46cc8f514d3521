package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// reload re-reads path and applies it; an invalid file changes nothing.
func (d *daemon) reload(path string) error {
	next, err := config.Load(path)
	if err == nil {
		err = d.apply(next)
	}
	d.lastReload.Store(&reloadResult{err == nil, time.Now()})
	var partial *partialError
	switch {
	case errors.As(err, &partial):
		d.log.WithError(err).WithField("file", path).Error("reload applied in part: the items named were left out; fix them and reload again")
	case err != nil:
		d.log.WithError(err).WithField("file", path).Error("reload rejected: the running configuration stays; fix the fields named and reload again")
	}
	return err
}

// partialError reports what apply could not do once it had started
// changing the running target; everything else was applied.
type partialError struct{ errs []error }

func (e *partialError) Error() string   { return errors.Join(e.errs...).Error() }
func (e *partialError) Unwrap() []error { return e.errs }

// apply moves the target from the running configuration to next, touching
// only what differs: hosts of unchanged subsystems keep their connections.
// Everything that can fail (opening backends, listening on new ports)
// happens before anything running changes, so a failure leaves the
// target as it was.
func (d *daemon) apply(next *config.Config) error {
	if err := next.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.cfg
	p := config.Diff(cur, next)

	if err := ensureRXE(next.RXE, d.log); err != nil {
		return err
	}

	// Backends that replace one being removed (same path) open after the
	// old one closes: a block device is opened exclusively.
	closing := map[string]bool{}
	for _, r := range p.DelNamespaces {
		closing[r.Path] = true
	}
	for _, s := range p.DelSubsystems {
		for _, n := range s.Namespaces {
			closing[n.Path] = true
		}
	}
	type opened struct {
		nqn string
		ns  *fabrics.Namespace
	}
	var ready []opened
	var later []config.NamespaceRef
	committed := false
	defer func() {
		if !committed {
			for _, o := range ready {
				o.ns.Backend.Close()
			}
		}
	}()
	open := func(nqn string, n config.Namespace) error {
		if n.Path != "" && closing[n.Path] {
			later = append(later, config.NamespaceRef{NQN: nqn, Namespace: n})
			return nil
		}
		ns, err := openNamespace(nqn, n)
		if err != nil {
			return fmt.Errorf("%s: %w", nsPath(next, nqn, n.NSID), err)
		}
		ready = append(ready, opened{nqn, ns})
		return nil
	}
	for _, r := range p.AddNamespaces {
		if err := open(r.NQN, r.Namespace); err != nil {
			return err
		}
	}
	for _, s := range p.AddSubsystems {
		for _, n := range s.Namespaces {
			if err := open(s.NQN, n); err != nil {
				return err
			}
		}
	}

	// New listeners, unless they take over the address of one going away.
	inUse := map[string]bool{}
	for _, pc := range p.DelPorts {
		inUse[fmt.Sprintf("%s:%d", pc.Address, pc.Port)] = true
	}
	newListeners := map[uint16]portListener{}
	newPorts := map[uint16]*fabrics.Port{}
	defer func() {
		if !committed {
			for _, l := range newListeners {
				l.Close(time.Second)
			}
		}
	}()
	for _, pc := range p.AddPorts {
		fp, err := newPort(pc)
		if err != nil {
			return fmt.Errorf("%s.address: %w", portPath(next, pc.ID), err)
		}
		newPorts[pc.ID] = fp
		if inUse[fmt.Sprintf("%s:%d", pc.Address, pc.Port)] {
			continue
		}
		l, err := listen(d.target, fp, d.log)
		if err != nil {
			return fmt.Errorf("%s: %w", portPath(next, pc.ID), err)
		}
		newListeners[pc.ID] = l
	}

	// Nothing below fails the whole change; what cannot be applied is
	// logged and left out of the running configuration.
	committed = true
	var problems []error
	applied := next.Clone()
	log := d.log
	for _, r := range p.DelNamespaces {
		if s := d.target.Subsystem(r.NQN); s != nil {
			if err := s.RemoveNamespace(r.NSID); err == nil {
				log.WithFields(logrus.Fields{"subsystem": r.NQN, "nsid": r.NSID}).Info("namespace removed")
			}
		}
	}
	for _, s := range p.DelSubsystems {
		if err := d.target.RemoveSubsystem(s.NQN); err == nil {
			log.WithField("subsystem", s.NQN).Info("subsystem removed")
		}
	}
	for _, pc := range p.DelPorts {
		if l := d.listeners[pc.ID]; l != nil {
			l.Close(5 * time.Second)
			delete(d.listeners, pc.ID)
		}
		if err := d.target.RemovePort(pc.ID); err == nil {
			log.WithFields(logrus.Fields{"port": pc.ID, "address": fmt.Sprintf("%s:%d", pc.Address, pc.Port)}).Info("port removed")
		}
	}
	for _, pc := range p.AddPorts {
		fp := newPorts[pc.ID]
		l := newListeners[pc.ID]
		if l == nil {
			var err error
			if l, err = listen(d.target, fp, d.log); err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", portPath(next, pc.ID), err))
				applied.Ports = slices.DeleteFunc(applied.Ports, func(x config.Port) bool { return x.ID == pc.ID })
				continue
			}
		}
		d.target.AddPort(fp)
		d.listeners[pc.ID] = l
	}
	for _, s := range p.AddSubsystems {
		fs := fabrics.NewSubsystem(s.NQN, s.Serial, s.Model, s.AllowAnyHost)
		for _, h := range s.Hosts {
			fs.AllowHost(h)
		}
		fs.SetPorts(s.Ports)
		fs.SetLimits(s.MaxControllers, s.MaxIOQueues)
		if err := d.target.AddSubsystem(fs); err != nil {
			problems = append(problems, err)
			continue
		}
		log.WithField("subsystem", s.NQN).Info("subsystem added")
	}
	for _, r := range p.ResizeNamespaces {
		ci, cj := findNS(cur, r.NQN, r.NSID)
		old := cur.Subsystems[ci].Namespaces[cj]
		if _, err := d.target.Subsystem(r.NQN).ResizeNamespace(r.NSID, int64(r.Size)); err != nil {
			problems = append(problems, fmt.Errorf("%s.size: %w", nsPath(next, r.NQN, r.NSID), err))
			i, j := findNS(applied, r.NQN, r.NSID)
			applied.Subsystems[i].Namespaces[j] = old
			continue
		}
		log.WithFields(logrus.Fields{"subsystem": r.NQN, "nsid": r.NSID, "from": old.Size, "to": r.Size}).Info("namespace resized")
	}
	for _, r := range p.Remeasure {
		s := d.target.Subsystem(r.NQN)
		if changed, err := s.ResizeNamespace(r.NSID, 0); err != nil {
			log.WithError(err).WithFields(logrus.Fields{"subsystem": r.NQN, "nsid": r.NSID}).Warn("measuring the block device again failed")
		} else if changed {
			ns := s.Namespace(r.NSID)
			log.WithFields(logrus.Fields{"subsystem": r.NQN, "nsid": r.NSID, "bytes": ns.Blocks() << ns.BlockShift}).Info("block device size changed; namespace resized")
		}
	}
	for _, s := range p.Access {
		d.target.Subsystem(s.NQN).SetHosts(s.AllowAnyHost, s.Hosts)
		log.WithFields(logrus.Fields{"subsystem": s.NQN, "allow_any_host": s.AllowAnyHost, "hosts": len(s.Hosts)}).Info("subsystem access changed")
	}
	for _, s := range p.Limits {
		d.target.Subsystem(s.NQN).SetLimits(s.MaxControllers, s.MaxIOQueues)
		log.WithFields(logrus.Fields{"subsystem": s.NQN, "max_controllers": s.MaxControllers, "max_io_queues": s.MaxIOQueues}).Info("subsystem limits changed; connected controllers keep what they have")
	}
	if _, limit := d.target.QueuePairs(); limit != next.Limits.MaxQueuePairs {
		d.target.SetMaxQueuePairs(next.Limits.MaxQueuePairs)
		if limit != 0 {
			log.WithFields(logrus.Fields{"from": limit, "to": next.Limits.MaxQueuePairs}).Info("limits.max_queue_pairs changed; queue pairs already connected stay")
		}
	}
	for _, s := range p.Links {
		d.target.Subsystem(s.NQN).LinkPorts(s.Ports)
		log.WithFields(logrus.Fields{"subsystem": s.NQN, "ports": s.Ports}).Info("subsystem ports changed")
	}
	for _, r := range later {
		ns, err := openNamespace(r.NQN, r.Namespace)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", nsPath(next, r.NQN, r.NSID), err))
			i, j := findNS(applied, r.NQN, r.NSID)
			applied.Subsystems[i].Namespaces = slices.Delete(applied.Subsystems[i].Namespaces, j, j+1)
			continue
		}
		ready = append(ready, opened{r.NQN, ns})
	}
	for _, o := range ready {
		s := d.target.Subsystem(o.nqn)
		if s == nil {
			o.ns.Backend.Close()
			continue
		}
		if err := s.AddNamespace(o.ns); err != nil {
			o.ns.Backend.Close()
			problems = append(problems, err)
			continue
		}
		log.WithFields(logrus.Fields{"subsystem": o.nqn, "nsid": o.ns.ID}).Info("namespace added")
	}

	if next.Log != cur.Log {
		configureLogger(d.logger, next.Log)
	}
	if next.Metrics.Address != cur.Metrics.Address {
		if d.metrics != nil {
			d.metrics.close()
			d.metrics = nil
		}
		if next.Metrics.Address != "" {
			m, err := serveMetrics(next.Metrics.Address, &collector{target: d.target, started: started, gen: d.generation}, d.log)
			if err != nil {
				problems = append(problems, err)
				applied.Metrics.Address = ""
			} else {
				d.metrics = m
			}
		}
	}
	if next.Control.Socket != cur.Control.Socket && cur.Control.Socket != "" {
		log.WithField("socket", cur.Control.Socket).Warn("control.socket: the new admin socket path takes effect at restart")
		applied.Control.Socket = cur.Control.Socket
	}
	if next.StateFile != cur.StateFile && cur.StateFile != "" {
		log.WithField("state_file", cur.StateFile).Warn("state_file: the new path takes effect at restart")
		applied.StateFile = cur.StateFile
	}
	d.cfg = applied
	d.gen.Add(1)
	if len(problems) > 0 {
		return &partialError{problems}
	}
	return nil
}

// findNS locates namespace nsid of subsystem nqn in c: the indexes of the
// subsystem and the namespace, or -1 and -1.
func findNS(c *config.Config, nqn string, nsid uint32) (int, int) {
	for i, s := range c.Subsystems {
		if s.NQN == nqn {
			for j, n := range s.Namespaces {
				if n.NSID == nsid {
					return i, j
				}
			}
		}
	}
	return -1, -1
}

// nsPath and portPath name a configuration item by its field path, as
// validation errors do.
func nsPath(c *config.Config, nqn string, nsid uint32) string {
	if i, j := findNS(c, nqn, nsid); i >= 0 {
		return fmt.Sprintf("subsystems[%d].namespaces[%d]", i, j)
	}
	return fmt.Sprintf("subsystem %s namespace %d", nqn, nsid)
}

func portPath(c *config.Config, id uint16) string {
	for i, p := range c.Ports {
		if p.ID == id {
			return fmt.Sprintf("ports[%d]", i)
		}
	}
	return fmt.Sprintf("port %d", id)
}
