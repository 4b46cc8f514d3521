package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
)

// sysfs is the root of /sys, a variable for tests.
var sysfs = "/sys"

// ensureRXE gives every listed netdev a soft-RoCE link unless an RDMA
// device already serves it, so one config file serves a machine without
// an RDMA NIC.
func ensureRXE(netdevs []string, log *logrus.Entry) error {
	for i, dev := range netdevs {
		if _, err := os.Stat(filepath.Join(sysfs, "class/net", dev)); err != nil {
			return fmt.Errorf("rxe[%d]: no network interface %q (see `ip link`)", i, dev)
		}
		if ib := rdmaDeviceOf(dev); ib != "" {
			log.WithFields(logrus.Fields{"netdev": dev, "rdma_device": ib}).Debug("netdev already has an RDMA device")
			continue
		}
		name := "rxe_" + dev
		if err := netlink.RdmaLinkAdd(name, "rxe", dev); err != nil {
			return fmt.Errorf("rxe[%d]: creating a soft-RoCE link on %s: %w (is the rdma_rxe module available? try `modprobe rdma_rxe`)", i, dev, err)
		}
		log.WithFields(logrus.Fields{"netdev": dev, "rdma_device": name}).Info("created soft-RoCE link")
	}
	return nil
}

// rdmaDeviceOf names the RDMA device whose port is bound to netdev, or "".
func rdmaDeviceOf(netdev string) string {
	ndevs, _ := filepath.Glob(filepath.Join(sysfs, "class/infiniband/*/ports/*/gid_attrs/ndevs/*"))
	for _, f := range ndevs {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSpace(string(b)) == netdev {
			return strings.Split(strings.TrimPrefix(f, filepath.Join(sysfs, "class/infiniband")+"/"), "/")[0]
		}
	}
	// rxe exposes its netdev as "parent" too, before any GID is set up.
	parents, _ := filepath.Glob(filepath.Join(sysfs, "class/infiniband/*/parent"))
	for _, f := range parents {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSpace(string(b)) == netdev {
			return filepath.Base(filepath.Dir(f))
		}
	}
	return ""
}
