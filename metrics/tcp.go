package metrics

import (
	"maps"
	"strconv"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the NVMe/TCP transport, by port.
var (
	dTCPConns        = prometheus.NewDesc(prefix+"tcp_connections", "Open NVMe/TCP connections (queue pairs) of a port.", []string{"port"}, nil)
	dTCPTermReqs     = prometheus.NewDesc(prefix+"tcp_term_requests_total", "Connections closed with a C2HTermReq: the host sent a PDU the protocol does not allow (the log names the error).", []string{"port"}, nil)
	dTCPDigests      = prometheus.NewDesc(prefix+"tcp_data_digest_errors_total", "Commands failed with Transient Transport Error on a data digest mismatch (the host retries them): a damaged network path.", []string{"port"}, nil)
	dTCPOverruns     = prometheus.NewDesc(prefix+"tcp_queue_overruns_total", "Connections closed because the host sent more commands than its queue size.", []string{"port"}, nil)
	dTCPDataTimeouts = prometheus.NewDesc(prefix+"tcp_data_timeouts_total", "Connections closed because the host sent no R2T's data, or read no response, within tcp.data_timeout_seconds: a stalled host, whose buffers went back to the pool.", []string{"port"}, nil)
	dTCPRefused      = prometheus.NewDesc(prefix+"tcp_refused_total", "Connections closed at once: limits.max_queue_pairs or the peer address's limits.unconnected_per_address was reached (nvmeof_tgt_connects_refused_total says which).", []string{"port"}, nil)
	dTCPTLS          = prometheus.NewDesc(prefix+"tcp_tls_handshakes_total", "TLS handshakes on a port with TLS, by result: ok (a secure channel made), failed (the handshake failed: a wrong key, an identity refused, TLS 1.2, a host gone; the log says which) or refused (a connection in clear to a port that requires TLS).", []string{"port", "result"}, nil)
	dTCPTLSRecords   = prometheus.NewDesc(prefix+"tcp_tls_record_errors_total", "TLS connections closed on a record that carries no data and no close_notify: an alert from the host, a KeyUpdate (not followed), or a record that fails to decrypt (the log names it).", []string{"port"}, nil)
	dTCPPoolSize     = prometheus.NewDesc(prefix+"tcp_buffer_pool_bytes", "Data buffer memory the TCP ports may lend to commands in flight.", nil, nil)
	dTCPPoolInUse    = prometheus.NewDesc(prefix+"tcp_buffer_pool_in_use_bytes", "TCP data buffer memory lent to commands in flight.", nil, nil)
)

func describeTCP(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dTCPConns, dTCPTermReqs, dTCPDigests, dTCPOverruns, dTCPDataTimeouts, dTCPRefused, dTCPTLS, dTCPTLSRecords, dTCPPoolSize, dTCPPoolInUse} {
		ch <- d
	}
}

// collectTCP sends the TCP ports' counters and the shared pool's use.
func collectTCP(e emit) {
	stats := tcp.Stats()
	if len(stats) == 0 {
		return
	}
	for id, s := range stats {
		port := strconv.Itoa(int(id))
		e.gauge(dTCPConns, float64(s.Connections.Load()), port)
		e.counter(dTCPTermReqs, float64(s.TermReqs.Load()), port)
		e.counter(dTCPDigests, float64(s.DataDigestErrors.Load()), port)
		e.counter(dTCPOverruns, float64(s.Overruns.Load()), port)
		e.counter(dTCPDataTimeouts, float64(s.DataTimeouts.Load()), port)
		e.counter(dTCPRefused, float64(s.Refused.Load()), port)
		if n := s.TLSHandshakes.Load() + s.TLSFailures.Load() + s.TLSRefused.Load(); n > 0 {
			e.counter(dTCPTLS, float64(s.TLSHandshakes.Load()), port, "ok")
			e.counter(dTCPTLS, float64(s.TLSFailures.Load()), port, "failed")
			e.counter(dTCPTLS, float64(s.TLSRefused.Load()), port, "refused")
			e.counter(dTCPTLSRecords, float64(s.TLSRecordErrors.Load()), port)
		}
	}
	p := tcp.SharedPool()
	e.gauge(dTCPPoolSize, float64(p.Limit()))
	e.gauge(dTCPPoolInUse, float64(p.Lent()))
}

// connectTimeouts counts, by port, the queue pairs closed for want of a
// Connect in time: fabrics' count, and TCP connections that did not even
// send their first command capsule.
func connectTimeouts(t *fabrics.Target) map[uint16]uint64 {
	out := maps.Clone(t.ConnectTimeouts())
	if out == nil {
		out = map[uint16]uint64{}
	}
	for id, s := range tcp.Stats() {
		if n := s.ConnectTimeouts.Load(); n > 0 {
			out[id] += n
		}
	}
	return out
}
