// Package metrics serves the daemon's Prometheus metrics. Collector reads
// the target's own counters at scrape time (the I/O path only bumps
// per-queue atomics, and nothing here runs per I/O): namespaces, QoS,
// connections, ANA, the RDMA and TCP transports, the gateway groups and
// the configuration's generation. Serve puts it on /metrics, with bounds
// on connections and their time, since the endpoint has no
// authentication of its own.
//
// Every metric is named nvmeof_tgt_*; the dashboard and alert rules in
// dist/ read them, and tests keep the names they use described here.
package metrics
