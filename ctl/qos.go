package ctl

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// qosFlags adds ctl set namespace's limit flags, which fill *p.
func qosFlags(fs *flag.FlagSet, p **api.QoSParams) {
	params := func() *api.QoSParams {
		if *p == nil {
			*p = &api.QoSParams{}
		}
		return *p
	}
	iops := func(name, what string, field func(*api.QoSParams) **uint64) {
		fs.Func(name, what+" per second, every host together (0: no limit)", func(s string) error {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("want a number of commands per second")
			}
			*field(params()) = &v
			return nil
		})
	}
	rate := func(name, what string, field func(*api.QoSParams) **api.ByteRate) {
		fs.Func(name, what+" per second, every host together, such as 100MiB (0: no limit)", func(s string) error {
			v, err := config.ParseRate(s)
			if err != nil {
				return err
			}
			b := api.ByteRate(v)
			*field(params()) = &b
			return nil
		})
	}
	iops("iops", "limit commands", func(q *api.QoSParams) **uint64 { return &q.IOPS })
	iops("read-iops", "limit reads", func(q *api.QoSParams) **uint64 { return &q.ReadIOPS })
	iops("write-iops", "limit writes", func(q *api.QoSParams) **uint64 { return &q.WriteIOPS })
	rate("bandwidth", "limit bytes read and written", func(q *api.QoSParams) **api.ByteRate { return &q.Bandwidth })
	rate("read-bandwidth", "limit bytes read", func(q *api.QoSParams) **api.ByteRate { return &q.ReadBandwidth })
	rate("write-bandwidth", "limit bytes written", func(q *api.QoSParams) **api.ByteRate { return &q.WriteBandwidth })
}

// qosText is ctl list's column for a namespace's limits: "" without.
func qosText(q *api.QoSState) string {
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
