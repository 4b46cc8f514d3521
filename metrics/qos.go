package metrics

import (
	"strconv"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	dQoSThrottled = prometheus.NewDesc(prefix+"qos_throttled_total", "Commands that waited on the namespace's QoS limits (subsystems[].namespaces[].qos).", nsLabels, nil)
	dQoSWait      = prometheus.NewDesc(prefix+"qos_wait_seconds_total", "Time commands waited on the namespace's QoS limits, before their data transfer.", nsLabels, nil)
	dQoSWaiting   = prometheus.NewDesc(prefix+"qos_waiting", "Commands waiting on the namespace's QoS limits now.", nsLabels, nil)
	dQoSTimedOut  = prometheus.NewDesc(prefix+"qos_timed_out_total", "Commands that waited on the namespace's QoS limits for 10 s and completed with Command Interrupted, which the host retries.", nsLabels, nil)
	dQoSLimit     = prometheus.NewDesc(prefix+"qos_limit", "The namespace's QoS limits that are set: commands (iops) or bytes (bandwidth) per second.", append(nsLabels, "limit"), nil)
)

func describeQoS(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dQoSThrottled, dQoSWait, dQoSWaiting, dQoSTimedOut, dQoSLimit} {
		ch <- d
	}
}

// collectQoS sends each namespace's QoS counters, and the limits it has.
func collectQoS(e emit, s *fabrics.Subsystem) {
	for _, id := range s.NamespaceIDs() {
		n := s.Namespace(id)
		if n == nil {
			continue
		}
		l := []string{s.NQN, strconv.FormatUint(uint64(id), 10)}
		st := n.QoSStats()
		e.counter(dQoSThrottled, float64(st.Throttled), l...)
		e.counter(dQoSWait, time.Duration(st.Waited).Seconds(), l...)
		e.gauge(dQoSWaiting, float64(st.Waiting), l...)
		e.counter(dQoSTimedOut, float64(st.TimedOut), l...)
		q := n.QoS()
		for _, f := range []struct {
			name string
			v    uint64
		}{{"iops", q.IOPS}, {"read_iops", q.ReadIOPS}, {"write_iops", q.WriteIOPS},
			{"bandwidth", q.Bandwidth}, {"read_bandwidth", q.ReadBandwidth}, {"write_bandwidth", q.WriteBandwidth}} {
			if f.v != 0 {
				e.gauge(dQoSLimit, float64(f.v), append(l, f.name)...)
			}
		}
	}
}
