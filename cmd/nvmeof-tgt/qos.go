package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"

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

// qosParams are set_namespace's qos keys: each one given replaces that
// limit (0 removes it); the others stay.
type qosParams struct {
	IOPS           *uint64   `json:"iops,omitempty"`
	ReadIOPS       *uint64   `json:"read_iops,omitempty"`
	WriteIOPS      *uint64   `json:"write_iops,omitempty"`
	Bandwidth      *byteRate `json:"bandwidth,omitempty"`
	ReadBandwidth  *byteRate `json:"read_bandwidth,omitempty"`
	WriteBandwidth *byteRate `json:"write_bandwidth,omitempty"`
}

// apply sets the limits p gives in q.
func (p *qosParams) apply(q *config.QoS) {
	q.IOPS = orDefault(p.IOPS, q.IOPS)
	q.ReadIOPS = orDefault(p.ReadIOPS, q.ReadIOPS)
	q.WriteIOPS = orDefault(p.WriteIOPS, q.WriteIOPS)
	rate := func(p *byteRate, cur config.Rate) config.Rate {
		if p == nil {
			return cur
		}
		return config.Rate(*p)
	}
	q.Bandwidth = rate(p.Bandwidth, q.Bandwidth)
	q.ReadBandwidth = rate(p.ReadBandwidth, q.ReadBandwidth)
	q.WriteBandwidth = rate(p.WriteBandwidth, q.WriteBandwidth)
}

// byteRate is a bandwidth parameter: bytes per second, or a string such
// as "100MiB" or "100MiB/s" as the configuration file takes.
type byteRate int64

func (b *byteRate) UnmarshalJSON(data []byte) error {
	s := string(data)
	switch {
	case s == "null":
		return nil
	case data[0] == '"':
		if err := json.Unmarshal(data, &s); err != nil {
			return paramError("qos", "invalid params: qos: %v", err)
		}
	case bytes.ContainsAny(data, ".eE"):
		return paramError("qos", "invalid params: qos bandwidth %s: want bytes per second or a string such as \"100MiB\"", data)
	}
	v, err := config.ParseRate(s)
	if err != nil {
		return paramError("qos", "invalid params: qos: %v", err)
	}
	*b = byteRate(v)
	return nil
}

// qosFlags adds ctl set namespace's limit flags, which fill *p.
func qosFlags(fs *flag.FlagSet, p **qosParams) {
	params := func() *qosParams {
		if *p == nil {
			*p = &qosParams{}
		}
		return *p
	}
	iops := func(name, what string, field func(*qosParams) **uint64) {
		fs.Func(name, what+" per second, every host together (0: no limit)", func(s string) error {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("want a number of commands per second")
			}
			*field(params()) = &v
			return nil
		})
	}
	rate := func(name, what string, field func(*qosParams) **byteRate) {
		fs.Func(name, what+" per second, every host together, such as 100MiB (0: no limit)", func(s string) error {
			v, err := config.ParseRate(s)
			if err != nil {
				return err
			}
			b := byteRate(v)
			*field(params()) = &b
			return nil
		})
	}
	iops("iops", "limit commands", func(q *qosParams) **uint64 { return &q.IOPS })
	iops("read-iops", "limit reads", func(q *qosParams) **uint64 { return &q.ReadIOPS })
	iops("write-iops", "limit writes", func(q *qosParams) **uint64 { return &q.WriteIOPS })
	rate("bandwidth", "limit bytes read and written", func(q *qosParams) **byteRate { return &q.Bandwidth })
	rate("read-bandwidth", "limit bytes read", func(q *qosParams) **byteRate { return &q.ReadBandwidth })
	rate("write-bandwidth", "limit bytes written", func(q *qosParams) **byteRate { return &q.WriteBandwidth })
}

// QoSState is a namespace's limits as the target enforces them (0: no
// limit; bandwidths in bytes per second) and what they held back.
type QoSState struct {
	IOPS           uint64  `json:"iops,omitempty"`
	ReadIOPS       uint64  `json:"read_iops,omitempty"`
	WriteIOPS      uint64  `json:"write_iops,omitempty"`
	Bandwidth      uint64  `json:"bandwidth,omitempty"`
	ReadBandwidth  uint64  `json:"read_bandwidth,omitempty"`
	WriteBandwidth uint64  `json:"write_bandwidth,omitempty"`
	Throttled      uint64  `json:"throttled"`    // commands that waited on a limit
	WaitSeconds    float64 `json:"wait_seconds"` // their total wait
	Waiting        int     `json:"waiting"`      // commands waiting now
}

// qosState is ns's QoSState, nil if it has no limits.
func qosState(ns *fabrics.Namespace) *QoSState {
	l := ns.QoS()
	if !l.Limited() {
		return nil
	}
	st := ns.QoSStats()
	return &QoSState{IOPS: l.IOPS, ReadIOPS: l.ReadIOPS, WriteIOPS: l.WriteIOPS, Bandwidth: l.Bandwidth,
		ReadBandwidth: l.ReadBandwidth, WriteBandwidth: l.WriteBandwidth,
		Throttled: st.Throttled, WaitSeconds: st.Waited.Seconds(), Waiting: st.Waiting}
}

// qosText is ctl list's column for a namespace's limits: "" without.
func qosText(q *QoSState) string {
	if q == nil {
		return ""
	}
	var parts []string
	for _, f := range []struct {
		name string
		v    uint64
	}{{"iops", q.IOPS}, {"read_iops", q.ReadIOPS}, {"write_iops", q.WriteIOPS}} {
		if f.v != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", f.name, f.v))
		}
	}
	for _, f := range []struct {
		name string
		v    uint64
	}{{"bandwidth", q.Bandwidth}, {"read_bandwidth", q.ReadBandwidth}, {"write_bandwidth", q.WriteBandwidth}} {
		if f.v != 0 {
			parts = append(parts, fmt.Sprintf("%s %s", f.name, config.Rate(f.v)))
		}
	}
	return "\tqos " + strings.Join(parts, ", ")
}
