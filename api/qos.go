package api

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
)

// QoSParams are set_namespace's qos keys: each one given replaces that
// limit (0 removes it); the others stay.
type QoSParams struct {
	IOPS           *uint64   `json:"iops,omitempty"`
	ReadIOPS       *uint64   `json:"read_iops,omitempty"`
	WriteIOPS      *uint64   `json:"write_iops,omitempty"`
	Bandwidth      *ByteRate `json:"bandwidth,omitempty"`
	ReadBandwidth  *ByteRate `json:"read_bandwidth,omitempty"`
	WriteBandwidth *ByteRate `json:"write_bandwidth,omitempty"`
}

// apply sets the limits p gives in q.
func (p *QoSParams) applyTo(q *config.QoS) {
	q.IOPS = orDefault(p.IOPS, q.IOPS)
	q.ReadIOPS = orDefault(p.ReadIOPS, q.ReadIOPS)
	q.WriteIOPS = orDefault(p.WriteIOPS, q.WriteIOPS)
	rate := func(p *ByteRate, cur config.Rate) config.Rate {
		if p == nil {
			return cur
		}
		return config.Rate(*p)
	}
	q.Bandwidth = rate(p.Bandwidth, q.Bandwidth)
	q.ReadBandwidth = rate(p.ReadBandwidth, q.ReadBandwidth)
	q.WriteBandwidth = rate(p.WriteBandwidth, q.WriteBandwidth)
}

// ByteRate is a bandwidth parameter: bytes per second, or a string such
// as "100MiB" or "100MiB/s" as the configuration file takes.
type ByteRate int64

func (b *ByteRate) UnmarshalJSON(data []byte) error {
	return byteParam(data, b, "qos", "qos bandwidth", `bytes per second or a string such as "100MiB"`, config.ParseRate)
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
