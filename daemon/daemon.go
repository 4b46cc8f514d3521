package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/nvmeof-tgt/nvmeof-tgt/metrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/sharedstate"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp"
	"github.com/sirupsen/logrus"
)

// daemon is the running target: the fabrics state, one listener per port
// and the configuration they were built from. Reconfiguration (reload or
// the admin socket) goes through apply, one at a time.
// Version is the daemon's release, for its logs and metrics; the command
// sets it.
var Version = "devel"

type Daemon struct {
	logger *logrus.Logger
	log    *logrus.Entry
	target *fabrics.Target
	// resvDir holds the reservation state of file and block namespaces,
	// beside the state file (reservations.go).
	resvDir string

	// edits makes every read-edit-apply of the admin API and every
	// reload one step, so that neither undoes the other by applying an
	// edit of a configuration that is no longer running. Taken before mu.
	edits sync.Mutex

	mu        sync.Mutex // serializes apply; guards the fields below
	cfg       *config.Config
	listeners map[uint16]portListener
	metrics   *metrics.Server

	// Read by scrapes and the watchdog without d.mu, which a reload may
	// hold for seconds while a removed namespace drains.
	gen        atomic.Uint64
	lastReload atomic.Pointer[reloadResult]
	counts     atomic.Pointer[configCounts]
	applying   atomic.Int64 // d.clock() when the running apply began; 0: none

	gateway *gatewaySet   // the ANA group leases (gateway.go); nil without a gateway block
	shared  *sharedConfig // the gateway group's shared configuration (shared.go); nil without

	sd    *notifier            // systemd; set before the admin socket opens
	clock func() time.Duration // CLOCK_MONOTONIC, or a test's clock
}

type reloadResult struct {
	ok   bool
	when time.Time
}

// portListener accepts a port's connections until closed.
type portListener interface{ Close(timeout time.Duration) }

// openListener opens a port's listener on its transport.
func openListener(t *fabrics.Target, p *fabrics.Port, log *logrus.Entry) (portListener, error) {
	if p.Transport == nvme.TransportTCP {
		return tcp.Listen(t, p, log)
	}
	return listen(t, p, log)
}

// listen opens an RDMA port's listener; a variable so tests run without RDMA.
var listen = listenRDMA

// Start builds the target from cfg: it opens every backend and listens on
// every port. On error everything opened so far is closed again.
func Start(cfg *config.Config, logger *logrus.Logger) (*Daemon, error) {
	log := logrus.NewEntry(logger)
	d := &Daemon{
		logger: logger, log: log, target: fabrics.NewTarget(log),
		// Everything but logging and the socket counts as a change.
		cfg:       &config.Config{Log: cfg.Log, Control: cfg.Control, StateFile: cfg.StateFile, RDMA: cfg.RDMA, TCP: cfg.TCP, IOEngine: cfg.IOEngine, Gateway: cfg.Gateway},
		listeners: map[uint16]portListener{},
		sd:        &notifier{clock: monotonic}, clock: monotonic,
		resvDir: sharedstate.ReservationDir(cfg.StateFile),
	}
	if n := cfg.TCP.BufferPool; n > 0 { // 0: a configuration without defaults (tests)
		tcp.SetPoolBytes(int64(n))
	}
	setTCPDataTimeout(cfg.TCP.DataTimeoutSeconds)
	engine, err := chooseEngine(cfg.IOEngine, log)
	if err != nil {
		return nil, err
	}
	d.target.SetIOEngine(engine)
	if err := pinGatewayGroups(d.target, cfg.Gateway); err != nil {
		return nil, err
	}
	if g := cfg.Gateway; g != nil && g.SharedConfig {
		// The group's newest subsystems, before anything serves.
		if d.shared, cfg, err = openShared(cfg, log); err != nil {
			return nil, err
		}
	}
	if err := d.apply(cfg); err != nil {
		d.Stop(time.Second)
		return nil, err
	}
	if d.gateway, err = startGateway(d.target, cfg.Gateway, log); err != nil {
		d.Stop(time.Second)
		return nil, err
	}
	if d.shared != nil {
		d.shared.follow(d)
	}
	logWarnings(log, cfg)
	d.gen.Store(1)
	d.lastReload.Store(&reloadResult{true, time.Now()})
	return d, nil
}

// secureChannel maps ports[].tls, validated, to the fabrics value.
func secureChannel(mode string) fabrics.SecureChannel {
	switch mode {
	case config.TLSAllowed:
		return fabrics.TLSAllowed
	case config.TLSRequired:
		return fabrics.TLSRequired
	}
	return fabrics.TLSNone
}

func newPort(pc config.Port) (*fabrics.Port, error) {
	addr, err := netip.ParseAddr(pc.Address)
	if err != nil {
		return nil, err
	}
	p := &fabrics.Port{ID: pc.ID, Transport: transportType(pc.Transport), Address: addr, ServiceID: pc.Port,
		InlineDataSize: pc.InlineDataSize, MaxQueueSize: pc.MaxQueueSize, TLS: secureChannel(pc.TLS)}
	if err := p.SetANAStates(anaStates(pc)); err != nil {
		return nil, err
	}
	return p, nil
}

// transportType is the TRTYPE of a configured transport; validation
// made sure it is one of config.Transports.
func transportType(name string) uint8 {
	if name == config.TransportTCP {
		return nvme.TransportTCP
	}
	return nvme.TransportRDMA
}

// anaStates is the port's ANA states as the target takes them; validation
// made sure every name is a state.
func anaStates(pc config.Port) map[uint32]nvme.ANAState {
	out := make(map[uint32]nvme.ANAState, len(pc.ANA))
	for g, name := range pc.ANA {
		s, ok := nvme.ParseANAState(name)
		if !ok {
			s = 0 // refused by the target, naming the group
		}
		out[g] = s
	}
	return out
}

// openNamespace opens nc's backend; gw is the configuration's gateway, if
// any: an rbd image in one of its groups must have the exclusive-lock
// feature. resvDir keeps the reservation state of file and block
// namespaces ("": none).
func openNamespace(nqn string, nc config.Namespace, gw *config.Gateway, resvDir string, log *logrus.Entry) (*fabrics.Namespace, error) {
	uuid, err := config.NamespaceUUID(nqn, nc.NSID, nc.UUID)
	if err != nil {
		return nil, fmt.Errorf("uuid: %w", err)
	}
	b, err := backend.Open(nc.Backend, backend.Options{
		Path: nc.Path, Size: int64(nc.Size), BlockSize: nc.BlockSize,
		ReadOnly: nc.ReadOnly, Buffered: nc.Buffered, Reserve: sharedstate.DeviceArea(nc),
		RBD: backend.RBDOptions{Pool: nc.Pool, Namespace: nc.RadosNamespace, Image: nc.Image, Create: nc.Create,
			Conf: nc.Ceph.Conf, User: nc.Ceph.User, Keyring: nc.Ceph.Keyring, ExclusiveLock: gw.HasGroup(nc.Group()),
			Client: gatewayClient(gw, nc.Group())},
	})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && nc.Backend == "block" {
			return nil, fmt.Errorf("%w (the block device is missing: check the path, or use backend: file to create an image file)", err)
		}
		return nil, err
	}
	ns, err := fabrics.NewNamespace(nc.NSID, b, nc.ReadOnly, uuid)
	if err == nil {
		err = ns.SetANAGroup(nc.Group())
		ns.SetQoS(qosLimits(nc.QoS))
	}
	if err == nil {
		err = sharedstate.SetupReservations(ns, nqn, nc, resvDir, log)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return ns, nil
}

// Stop disconnects every host, waits for the queue pairs to go, then
// closes the backends so every completed write is on stable storage.
func (d *Daemon) Stop(timeout time.Duration) {
	d.shared.stop() // no change of the group's applied from here on
	// Give up owned gateway groups first, while the backends are open:
	// inaccessible here, the group's commands in flight completed and
	// flushed, then the lease released for a peer to take.
	d.gateway.stop(min(timeout, 3*time.Second))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.metrics != nil {
		d.metrics.Close()
		d.metrics = nil
	}
	for id, l := range d.listeners {
		l.Close(timeout)
		delete(d.listeners, id)
	}
	// Close flushes every namespace before closing it.
	d.target.Close()
}

// generation reports the configuration generation for the metrics.
func (d *Daemon) Generation() (uint64, bool, time.Time) {
	r := d.lastReload.Load()
	if r == nil {
		r = &reloadResult{}
	}
	return d.gen.Load(), r.ok, r.when
}

// lockEdits holds off every other configuration change (admin API
// edits and reloads) until the returned function is called.
// Log is the daemon's log.
func (d *Daemon) Log() *logrus.Entry { return d.log }

// Target is the running target.
func (d *Daemon) Target() *fabrics.Target { return d.target }

// Gateway is the gateway's name, its cookie and its groups' runners; no
// runners without a gateway block.
func (d *Daemon) Gateway() (name, cookie string, runners []*gateway.Runner) {
	if d.gateway == nil {
		return "", "", nil
	}
	return d.gateway.name, d.gateway.cookie, d.gateway.runners
}

func (d *Daemon) LockEdits() (unlock func()) {
	d.edits.Lock()
	return d.edits.Unlock
}

// running returns a copy of the running configuration.
func (d *Daemon) Running() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.Clone()
}

// setTCPDataTimeout applies tcp.data_timeout_seconds (0: the default).
func setTCPDataTimeout(secs int) {
	d := tcp.DefaultDataTimeout
	if secs > 0 {
		d = time.Duration(secs) * time.Second
	}
	tcp.SetDataTimeout(d)
}
