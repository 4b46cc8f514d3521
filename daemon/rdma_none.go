//go:build !cgo

package daemon

import (
	"fmt"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// errNoRDMA is what an RDMA port gets from a build without cgo.
const errNoRDMA = "this nvmeof-tgt is built without cgo, so without the RDMA transport: use transport: tcp, or build it with CGO_ENABLED=1 (libibverbs and librdmacm; docs/operations.md)"

// configureRDMA refuses a configuration with an RDMA port: a build
// without cgo serves NVMe/TCP only.
func configureRDMA(cfg *config.Config) error {
	for i, p := range cfg.Ports {
		if p.Transport == config.TransportRDMA {
			return fmt.Errorf("ports[%d]: transport rdma: %s", i, errNoRDMA)
		}
	}
	return nil
}

// listenRDMA refuses an RDMA port added while running.
func listenRDMA(t *fabrics.Target, p *fabrics.Port, log *logrus.Entry) (portListener, error) {
	return nil, fmt.Errorf("port %d: transport rdma: %s", p.ID, errNoRDMA)
}
