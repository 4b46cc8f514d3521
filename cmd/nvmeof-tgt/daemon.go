package main

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
	"github.com/sirupsen/logrus"
)

// daemon is the running target: the fabrics state and one listener per
// port.
type daemon struct {
	target    *fabrics.Target
	listeners []*rdma.Listener
	log       *logrus.Entry
}

// start builds the target from cfg, opens every backend and listens on
// every port. On error everything opened so far is closed again.
func start(cfg *config.Config, log *logrus.Entry) (d *daemon, err error) {
	d = &daemon{target: fabrics.NewTarget(log), log: log}
	defer func() {
		if err != nil {
			d.stop(time.Second)
		}
	}()
	ports := map[uint16]*fabrics.Port{}
	for i, pc := range cfg.Ports {
		addr, err := netip.ParseAddr(pc.Address)
		if err != nil {
			return nil, fmt.Errorf("ports[%d].address: %w", i, err)
		}
		p := &fabrics.Port{ID: pc.ID, Address: addr, ServiceID: pc.Port,
			InlineDataSize: pc.InlineDataSize, MaxQueueSize: pc.MaxQueueSize}
		if err := d.target.AddPort(p); err != nil {
			return nil, fmt.Errorf("ports[%d]: %w", i, err)
		}
		ports[p.ID] = p
	}
	for i, sc := range cfg.Subsystems {
		s, err := buildSubsystem(sc)
		if err != nil {
			return nil, fmt.Errorf("subsystems[%d]: %w", i, err)
		}
		if err := d.target.AddSubsystem(s); err != nil {
			return nil, fmt.Errorf("subsystems[%d]: %w", i, err)
		}
	}
	for _, pc := range cfg.Ports {
		l, err := rdma.Listen(d.target, ports[pc.ID], log)
		if err != nil {
			return nil, fmt.Errorf("port %d: %w", pc.ID, err)
		}
		d.listeners = append(d.listeners, l)
	}
	return d, nil
}

func buildSubsystem(sc config.Subsystem) (*fabrics.Subsystem, error) {
	s := fabrics.NewSubsystem(sc.NQN, sc.Serial, sc.Model, sc.AllowAnyHost)
	for _, h := range sc.Hosts {
		s.AllowHost(h)
	}
	s.SetPorts(sc.Ports)
	for j, nc := range sc.Namespaces {
		ns, err := openNamespace(sc.NQN, nc)
		if err != nil {
			return nil, fmt.Errorf("namespaces[%d]: %w", j, err)
		}
		if err := s.AddNamespace(ns); err != nil {
			ns.Backend.Close()
			return nil, fmt.Errorf("namespaces[%d]: %w", j, err)
		}
	}
	return s, nil
}

func openNamespace(nqn string, nc config.Namespace) (*fabrics.Namespace, error) {
	uuid, err := config.NamespaceUUID(nqn, nc.NSID, nc.UUID)
	if err != nil {
		return nil, fmt.Errorf("uuid: %w", err)
	}
	b, err := backend.Open(nc.Backend, backend.Options{
		Path: nc.Path, Size: int64(nc.Size), BlockSize: nc.BlockSize,
		ReadOnly: nc.ReadOnly, Buffered: nc.Buffered,
	})
	if err != nil {
		return nil, err
	}
	ns, err := fabrics.NewNamespace(nc.NSID, b, nc.ReadOnly, uuid)
	if err != nil {
		b.Close()
		return nil, err
	}
	return ns, nil
}

// stop disconnects every host, waits for the queue pairs to go, then
// closes the backends so every completed write is on stable storage.
func (d *daemon) stop(timeout time.Duration) {
	for _, l := range d.listeners {
		l.Close(timeout)
	}
	for _, s := range d.target.Subsystems() {
		for _, id := range s.NamespaceIDs() {
			if ns := s.Namespace(id); ns != nil {
				if err := ns.Backend.Flush(); err != nil {
					d.log.WithError(err).WithField("subsystem", s.NQN).Warn("flush at shutdown failed")
				}
			}
		}
	}
	d.target.Close()
}
