//go:build cgo

package daemon

import (
	"fmt"
	"path/filepath"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
	"github.com/sirupsen/logrus"
)

// RDMA, through rdma-core's libraries, needs cgo; rdma_none.go stands in
// for this file in a build without it, which serves NVMe/TCP only.

// rdmaSettings are the transport's resources as configured.
func rdmaSettings(c config.RDMA) rdma.Settings {
	return rdma.Settings{BufferPool: int64(c.BufferPool), SharedReceiveQueue: c.SRQ(),
		ReceiveQueueDepth: c.ReceiveQueueDepth, PollerCPUs: c.PollerCPUs}
}

// configureRDMA sets the RDMA transport's resources as configured, and
// checks that the locked-memory limit holds what each device registers.
func configureRDMA(cfg *config.Config) error {
	rs := rdmaSettings(cfg.RDMA)
	if err := rdma.Configure(rs); err != nil {
		return err
	}
	var inline []int
	for _, p := range cfg.Ports {
		inline = append(inline, int(p.InlineDataSize))
	}
	return checkMemlock(rdma.DeviceMemory(rs, inline))
}

// listenRDMA opens an RDMA port's listener.
func listenRDMA(t *fabrics.Target, p *fabrics.Port, log *logrus.Entry) (portListener, error) {
	l, err := rdma.Listen(t, p, log)
	if err != nil {
		if devs, _ := filepath.Glob(filepath.Join(sysfs, "class/infiniband/*")); len(devs) == 0 {
			return nil, fmt.Errorf("no RDMA device on this machine: load your RDMA NIC's driver, or add `rxe: [IFACE]` to the configuration for a soft-RoCE link (%w)", err)
		}
		return nil, err
	}
	return l, nil
}
