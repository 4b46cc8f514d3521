package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// QoS is a namespace's rate limits, one budget shared by every host and
// queue that uses it; 0 or absent is no limit. They change live with a
// reload.
type QoS struct {
	IOPS           uint64 `yaml:"iops,omitempty"`
	ReadIOPS       uint64 `yaml:"read_iops,omitempty"`
	WriteIOPS      uint64 `yaml:"write_iops,omitempty"`
	Bandwidth      Rate   `yaml:"bandwidth,omitempty"`
	ReadBandwidth  Rate   `yaml:"read_bandwidth,omitempty"`
	WriteBandwidth Rate   `yaml:"write_bandwidth,omitempty"`
}

// Limited reports whether any limit is set.
func (q QoS) Limited() bool { return q != QoS{} }

// Rate is bytes per second: a size ("100MiB"), optionally followed by "/s".
type Rate Size

// ParseRate reads a rate such as 104857600, "100MiB" or "100MiB/s".
func ParseRate(s string) (Rate, error) {
	v, err := ParseSize(strings.TrimSuffix(strings.TrimSpace(s), "/s"))
	if err != nil {
		return 0, fmt.Errorf("invalid rate %q (want bytes per second such as 100MiB or 100MiB/s)", s)
	}
	return Rate(v), nil
}

// UnmarshalYAML accepts an integer or a size string, with or without "/s".
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	return decodeScalar(n, r, ParseRate, "a rate must be a number or a string such as 100MiB")
}

// MarshalYAML writes the size form, as Size does.
func (r Rate) MarshalYAML() (any, error) { return Size(r).MarshalYAML() }

// String is the size form with "/s": "100MiB/s".
func (r Rate) String() string { return Size(r).String() + "/s" }

// Lowest limits a namespace may have: below them one command (up to 1 MiB)
// or a host's queue of them would wait past the host's I/O timeout.
const (
	MinQoSIOPS      = 10
	MinQoSBandwidth = 1 << 20
)

// validate checks the limits of the namespace at path.
func (q QoS) validate(v *validator, path string) {
	for _, f := range []struct {
		key string
		val uint64
	}{{"iops", q.IOPS}, {"read_iops", q.ReadIOPS}, {"write_iops", q.WriteIOPS}} {
		if f.val != 0 && f.val < MinQoSIOPS {
			v.add(path+".qos."+f.key, "%d is below %d: commands would wait past the host's I/O timeout (0 or leave it out for no limit)", f.val, MinQoSIOPS)
		}
	}
	for _, f := range []struct {
		key string
		val Rate
	}{{"bandwidth", q.Bandwidth}, {"read_bandwidth", q.ReadBandwidth}, {"write_bandwidth", q.WriteBandwidth}} {
		if f.val < 0 || f.val != 0 && f.val < MinQoSBandwidth {
			v.add(path+".qos."+f.key, "%d B/s is below 1MiB/s: a 1 MiB command would wait past the host's I/O timeout (0 or leave it out for no limit)", int64(f.val))
		}
	}
}
