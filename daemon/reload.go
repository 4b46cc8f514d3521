package daemon

import (
	"errors"
	"fmt"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/sirupsen/logrus"
)

// reload re-reads path and applies it; an invalid file changes nothing.
// systemd hears RELOADING=1 before and READY=1 after, whatever the outcome
// (the caller reports that: SIGHUP in the log, `ctl reload` in its exit
// status, which is what makes `systemctl reload` fail).
func (d *Daemon) Reload(path string) error {
	d.sd.reloading() // at once, also while an admin change holds the edit lock
	defer d.LockEdits()()
	next, err := config.Load(path)
	var version uint64
	if err == nil && d.shared != nil {
		// The file has this daemon's own settings; the subsystems are
		// the group's newest.
		next, version, err = d.shared.reload(next)
	}
	if err == nil {
		err = d.apply(next)
	}
	var partial *partialError
	if d.shared != nil && (err == nil || errors.As(err, &partial)) {
		d.shared.version.Store(version)
	}
	d.lastReload.Store(&reloadResult{err == nil, time.Now()})
	switch {
	case errors.As(err, &partial):
		d.log.WithError(err).WithField("file", path).Error("reload applied in part: the items named were left out; fix them and reload again")
	case err != nil:
		d.log.WithError(err).WithField("file", path).Error("reload rejected: the running configuration stays; fix the fields named and reload again")
	}
	if err == nil || partial != nil {
		logWarnings(d.log.WithField("file", path), next)
	}
	d.sd.readyNow(d.statusLine())
	return err
}

// logWarnings logs what `-check` warns about in cfg: valid, but likely
// not what was meant.
func logWarnings(log *logrus.Entry, cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
}

// partialError reports what apply could not do once it had started
// changing the running target; everything else was applied.
type partialError struct{ errs []error }

func (e *partialError) Error() string   { return errors.Join(e.errs...).Error() }
func (e *partialError) Unwrap() []error { return e.errs }

// AppliedInPart is what was left out, for the API's error.
func (e *partialError) AppliedInPart() []error { return e.errs }

// Apply is an edit of the running configuration, the API's: with a
// shared configuration (gateway.shared_config) the gateway group shares
// it, or it is undone and refused.
func (d *Daemon) Apply(next *config.Config) error {
	if d.shared == nil {
		return d.apply(next)
	}
	return d.shared.change(d, next)
}

// apply moves the target from the running configuration to next, touching
// only what differs: hosts of unchanged subsystems keep their connections.
// Everything that can fail (opening backends, listening on new ports)
// happens in prepare, before anything running changes, so a failure there
// leaves the target as it was. What fails in commit is left out of the
// running configuration and reported in a partialError.
func (d *Daemon) apply(next *config.Config) error {
	if err := next.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.applying.Store(max(int64(d.clock()), 1))
	defer d.applying.Store(0)
	if err := ensureRXE(next.RXE, d.log); err != nil {
		return err
	}
	c := newChange(d, next)
	if err := c.prepare(); err != nil {
		c.abort()
		return err
	}
	c.commit()
	d.cfg = c.applied
	d.gen.Add(1)
	d.counts.Store(countsOf(c.applied))
	d.sd.setStatus(d.statusLine())
	if len(c.problems) > 0 {
		return &partialError{c.problems}
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

func subPath(c *config.Config, nqn string) string {
	for i, s := range c.Subsystems {
		if s.NQN == nqn {
			return fmt.Sprintf("subsystems[%d]", i)
		}
	}
	return "subsystem " + nqn
}

func portPath(c *config.Config, id uint16) string {
	for i, p := range c.Ports {
		if p.ID == id {
			return fmt.Sprintf("ports[%d]", i)
		}
	}
	return fmt.Sprintf("port %d", id)
}
