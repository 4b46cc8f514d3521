package daemon

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/metrics"
	"github.com/sirupsen/logrus"
)

// The gateway group's shared configuration (config/shared.go): the
// subsystems live in one RADOS object, versioned. A change through this
// daemon's API is applied here, then written with a compare-and-set on the
// version it was made from, then notified; a conflict or an unreachable
// cluster undoes it here and refuses it. Every gateway watches the object
// (and reads it every sharedPoll, for a missed notification) and applies a
// newer version with the plan and commit of a reload.

// sharedStore is the object, as backend.RadosLease reaches it.
type sharedStore interface {
	ReadAll() ([]byte, error) // ENOENT: no object
	Replace(key, old, version string, data []byte) error
	Watch(notified func()) error
	WatchError() error
	Unwatch()
	Notify() error
	Close()
}

// versionKey is the object's attribute the compare-and-set is on.
const versionKey = "nvmeof-tgt.version"

// sharedPoll is how often a gateway reads the object even without a
// notification.
const sharedPoll = 10 * time.Second

// errSharedConflict: another gateway changed the configuration first.
var errSharedConflict = errors.New("the gateway group's configuration changed through another gateway meanwhile")

type sharedConfig struct {
	store   sharedStore
	key     []byte // seals the secrets; nil without gateway.secret_key_file
	object  string
	version atomic.Uint64 // the version applied here; changed under d.edits
	wake    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	log     *logrus.Entry
	failed  uint64 // the last version that could not be applied, logged once
}

// openShared opens the group's configuration object and returns cfg with
// the group's subsystems. With no object yet, cfg's own subsystems become
// version 1 (the first gateway moved to a shared configuration).
func openShared(cfg *config.Config, log *logrus.Entry) (*sharedConfig, *config.Config, error) {
	g := cfg.Gateway
	sc := &sharedConfig{object: g.ConfigObject(), wake: make(chan struct{}, 1), log: log.WithField("object", g.ConfigObject())}
	if g.SecretKeyFile != "" {
		key, err := config.ReadSecretKey(g.SecretKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway.secret_key_file: %w", err)
		}
		sc.key = key
	}
	l, err := backend.OpenRadosLease(gatewayRados(g, ""), sc.object, "", time.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway shared configuration: %w", err)
	}
	sc.store = l
	s, err := sc.read()
	if err == nil {
		sc.ignoring(cfg, s.Version)
	} else if errors.Is(err, syscall.ENOENT) {
		s, err = sc.create(cfg)
	}
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("gateway shared configuration %s: %w", sc.object, err)
	}
	sc.version.Store(s.Version)
	return sc, cfg.WithShared(s.Subsystems), nil
}

// ignoring logs that the file's own subsystems, if any, are not used.
func (sc *sharedConfig) ignoring(file *config.Config, version uint64) {
	if len(file.Subsystems) > 0 {
		sc.log.WithFields(logrus.Fields{"version": version, "subsystems_in_file": len(file.Subsystems)}).Warn("the configuration file's subsystems are not used: the gateway group's shared configuration has the subsystems (ctl save writes the file without them)")
	}
}

// create writes cfg's subsystems as version 1; if another gateway
// created the object first, its version is read.
func (sc *sharedConfig) create(cfg *config.Config) (config.Shared, error) {
	s := config.Shared{Version: 1, Subsystems: cfg.Shared()}
	data, err := config.MarshalShared(s, sc.key)
	if err != nil {
		return config.Shared{}, err
	}
	err = sc.store.Replace(versionKey, "", "1", data)
	if errors.Is(err, syscall.EEXIST) {
		return sc.read()
	}
	if err != nil {
		return config.Shared{}, err
	}
	sc.log.WithField("subsystems", len(s.Subsystems)).Info("gateway shared configuration created from this daemon's file, version 1")
	return s, nil
}

func (sc *sharedConfig) read() (config.Shared, error) {
	data, err := sc.store.ReadAll()
	if err != nil {
		return config.Shared{}, err
	}
	return config.ParseShared(data, sc.key)
}

// change applies next here and shares it with the group (the API's
// edits; the caller holds the edit lock). Only the subsystems are shared:
// an edit of this daemon's own settings (a port) is not written.
func (sc *sharedConfig) change(d *Daemon, next *config.Config) error {
	g := next.Gateway
	for i, sub := range next.Subsystems {
		if (sub.CntlidMin != 0 || sub.CntlidMax != 0) && (sub.CntlidMin != g.CntlidMin || sub.CntlidMax != g.CntlidMax) {
			return fmt.Errorf("subsystems[%d].cntlid_min: in a shared configuration every subsystem hands out this gateway's controller IDs, gateway.cntlid_min and cntlid_max (%d..%d); leave them out", i, g.CntlidMin, g.CntlidMax)
		}
	}
	subs := next.Shared()
	next = next.WithShared(subs)
	prev := d.Running()
	if reflect.DeepEqual(prev.Shared(), subs) {
		return d.apply(next)
	}
	v := sc.version.Load()
	data, err := config.MarshalShared(config.Shared{Version: v + 1, Subsystems: subs}, sc.key)
	if err != nil {
		return err
	}
	if err := d.apply(next); err != nil {
		// A change refused before it started (prepare) changed nothing;
		// one applied in part is undone.
		var partial *partialError
		if errors.As(err, &partial) {
			d.undo(prev)
		}
		return err
	}
	err = sc.store.Replace(versionKey, strconv.FormatUint(v, 10), strconv.FormatUint(v+1, 10), data)
	if err != nil {
		d.undo(prev)
		if errors.Is(err, syscall.ECANCELED) || errors.Is(err, syscall.EEXIST) {
			sc.poke() // fetch the newer version
			return fmt.Errorf("%w (this gateway runs version %d): the change is refused; make it again once the newer version is applied here", errSharedConflict, v)
		}
		return fmt.Errorf("the change is refused: the gateway group's shared configuration %s cannot be written: %w", sc.object, err)
	}
	sc.version.Store(v + 1)
	if err := sc.store.Notify(); err != nil {
		sc.log.WithError(err).Warn("gateway shared configuration: notifying the other gateways failed; they read it within " + sharedPoll.String())
	}
	sc.log.WithField("version", v+1).Info("gateway shared configuration changed through this gateway")
	return nil
}

// undo puts the running configuration back after a change that could not
// be shared.
func (d *Daemon) undo(prev *config.Config) {
	if err := d.apply(prev); err != nil {
		d.log.WithError(err).Error("undoing a change the gateway group refused: applied in part")
	}
}

// reload is the file's configuration next with the group's newest
// subsystems, for a reload.
func (sc *sharedConfig) reload(next *config.Config) (*config.Config, uint64, error) {
	s, err := sc.read()
	if err != nil {
		return nil, 0, fmt.Errorf("gateway shared configuration %s: %w", sc.object, err)
	}
	sc.ignoring(next, s.Version)
	return next.WithShared(s.Subsystems), s.Version, nil
}

func (sc *sharedConfig) poke() {
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// follow applies every newer version until stop.
func (sc *sharedConfig) follow(d *Daemon) {
	ctx, cancel := context.WithCancel(context.Background())
	sc.cancel, sc.done = cancel, make(chan struct{})
	go func() {
		defer close(sc.done)
		t := time.NewTicker(sharedPoll)
		defer t.Stop()
		watching := false
		for {
			if watching && sc.store.WatchError() != nil {
				sc.store.Unwatch()
				watching = false
			}
			if !watching {
				watching = sc.store.Watch(sc.poke) == nil
			}
			sc.catchUp(d)
			select {
			case <-ctx.Done():
				return
			case <-sc.wake:
			case <-t.C:
			}
		}
	}()
}

// catchUp applies the object's version if it is newer than the one
// running here.
func (sc *sharedConfig) catchUp(d *Daemon) {
	s, err := sc.read()
	if err != nil || s.Version <= sc.version.Load() {
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			sc.log.WithError(err).Debug("gateway shared configuration: read failed; trying again")
		}
		return
	}
	defer d.LockEdits()()
	if s.Version <= sc.version.Load() { // applied meanwhile, by a change here
		return
	}
	err = d.apply(d.Running().WithShared(s.Subsystems))
	var partial *partialError
	if err != nil && !errors.As(err, &partial) {
		if sc.failed != s.Version {
			sc.log.WithError(err).WithField("version", s.Version).Error("gateway shared configuration: this gateway cannot apply the group's newest version; it keeps the running one and tries again")
			sc.failed = s.Version
		}
		return
	}
	from := sc.version.Swap(s.Version)
	log := sc.log.WithFields(logrus.Fields{"version": s.Version, "from": from})
	if err != nil {
		log.WithError(err).Error("gateway shared configuration applied in part: the items named were left out")
		return
	}
	log.Info("gateway shared configuration applied")
}

// groupView is the gateway group as this daemon sees it, for the metrics.
func (d *Daemon) groupView() metrics.GroupView {
	var v metrics.GroupView
	if d.shared != nil {
		v.ConfigVersion = d.shared.version.Load()
	}
	if gs := runningGateway.Load(); gs != nil && gs.members != nil {
		v.Members = len(gs.members.List())
	}
	return v
}

func (sc *sharedConfig) stop() {
	if sc == nil || sc.store == nil {
		return
	}
	if sc.cancel != nil {
		sc.cancel()
		<-sc.done
	}
	sc.store.Close()
	sc.store = nil
}
