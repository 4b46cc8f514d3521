package daemon

import (
	"fmt"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// Per-namespace QoS limits: from the configuration to the target, and
// back out through get_state, ctl list and the metrics.

// qosLimits is the target's form of a namespace's qos block.
func qosLimits(q config.QoS) fabrics.QoSLimits {
	return fabrics.QoSLimits{IOPS: q.IOPS, ReadIOPS: q.ReadIOPS, WriteIOPS: q.WriteIOPS,
		Bandwidth: uint64(q.Bandwidth), ReadBandwidth: uint64(q.ReadBandwidth), WriteBandwidth: uint64(q.WriteBandwidth)}
}

// setQoS applies new limits to kept namespaces, in place: hosts keep their
// connections, and commands waiting on the old limits go at the new ones.
func (c *change) setQoS() {
	for _, r := range c.plan.QoS {
		s := c.keptSubsystem(r.NQN)
		if s == nil {
			continue
		}
		if err := s.SetQoS(r.NSID, qosLimits(r.QoS)); err != nil {
			c.problem(fmt.Errorf("%s.qos: %w", nsPath(c.next, r.NQN, r.NSID), err), nil)
			continue
		}
		c.log.WithFields(logrus.Fields{"subsystem": r.NQN, "nsid": r.NSID, "iops": r.QoS.IOPS, "read_iops": r.QoS.ReadIOPS,
			"write_iops": r.QoS.WriteIOPS, "bandwidth": int64(r.QoS.Bandwidth), "read_bandwidth": int64(r.QoS.ReadBandwidth),
			"write_bandwidth": int64(r.QoS.WriteBandwidth)}).Info("namespace qos limits changed")
	}
}
