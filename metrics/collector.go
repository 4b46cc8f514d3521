package metrics

import (
	"runtime"
	"strconv"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector turns the target's own counters into metrics at scrape time:
// the I/O path only bumps per-queue atomics, and nothing here runs per I/O.
type Collector struct {
	Target  *fabrics.Target
	Version string // the daemon's, for build_info
	// Generation is the configuration generation, whether the last
	// reload applied in full, and when the configuration was loaded.
	Generation func() (generation uint64, ok bool, when time.Time)
	// Gateways is the status of each gateway group's runner; nil or
	// empty without a gateway.
	Gateways func() []gateway.Status
	// Group is the gateway group as this gateway sees it (GroupView);
	// nil without a gateway.
	Group func() GroupView
}

const prefix = "nvmeof_tgt_"

var (
	nsLabels = []string{"subsystem", "nsid"}

	dReads        = prometheus.NewDesc(prefix+"reads_completed_total", "Read commands completed successfully.", nsLabels, nil)
	dWrites       = prometheus.NewDesc(prefix+"writes_completed_total", "Write commands completed successfully.", nsLabels, nil)
	dReadBytes    = prometheus.NewDesc(prefix+"read_bytes_total", "Bytes read by hosts.", nsLabels, nil)
	dWriteBytes   = prometheus.NewDesc(prefix+"written_bytes_total", "Bytes written by hosts.", nsLabels, nil)
	dReadTime     = prometheus.NewDesc(prefix+"read_time_seconds_total", "Time spent on reads, from command arrival to completion.", nsLabels, nil)
	dWriteTime    = prometheus.NewDesc(prefix+"write_time_seconds_total", "Time spent on writes, from command arrival to completion.", nsLabels, nil)
	dFlushes      = prometheus.NewDesc(prefix+"flushes_completed_total", "Flush commands completed.", nsLabels, nil)
	dDiscards     = prometheus.NewDesc(prefix+"discards_completed_total", "Dataset Management (deallocate) commands completed.", nsLabels, nil)
	dZeroes       = prometheus.NewDesc(prefix+"write_zeroes_completed_total", "Write Zeroes commands completed.", nsLabels, nil)
	dReadLatency  = prometheus.NewDesc(prefix+"read_latency_seconds", "Read latency.", nsLabels, nil)
	dWriteLatency = prometheus.NewDesc(prefix+"write_latency_seconds", "Write latency.", nsLabels, nil)
	dNamespaceSz  = prometheus.NewDesc(prefix+"namespace_size_bytes", "Namespace capacity.", nsLabels, nil)
	dInFlight     = prometheus.NewDesc(prefix+"commands_in_flight", "Commands on the namespace that have not completed: executing, waiting on QoS or on the backend. A handover and a namespace removal wait for these.", nsLabels, nil)
	dUnsettled    = prometheus.NewDesc(prefix+"unsettled_writes", "Writes to a gateway group's namespace that timed out in the Ceph cluster since this gateway's client opened it. They may still land, so while this is above 0 the group is not released cleanly: its next owner fences this gateway (which then rebuilds its client, and the count starts again at 0).", nsLabels, nil)
	dResvUnavail  = prometheus.NewDesc(prefix+"reservation_unavailable", "Namespaces whose reservation state other daemons share: 1 while this daemon cannot read it (shared_reservations: no refresh for 1 s) and answers the namespace's I/O with ANA Inaccessible, else 0. A gateway group's rbd namespaces step down instead, and read 0.", nsLabels, nil)

	dControllers = prometheus.NewDesc(prefix+"controllers", "Connected controllers.", []string{"subsystem", "port"}, nil)
	dQueuePairs  = prometheus.NewDesc(prefix+"queue_pairs", "Connected queue pairs (admin and I/O).", []string{"subsystem", "port"}, nil)
	dRefused     = prometheus.NewDesc(prefix+"connects_refused_total", "Connect commands refused, by reason.", []string{"subsystem", "port", "reason"}, nil)
	dAuthFailed  = prometheus.NewDesc(prefix+"authentication_failures_total", "Failed DH-HMAC-CHAP authentications, by host NQN (\"unlisted\" for a host not in hosts) and reason.", []string{"subsystem", "host", "reason"}, nil)
	dKAExpired   = prometheus.NewDesc(prefix+"keep_alive_expiries_total", "Controllers torn down because the host stopped sending Keep Alive.", []string{"subsystem"}, nil)
	dConnTimeout = prometheus.NewDesc(prefix+"connect_timeouts_total", "Queue pairs disconnected because no Connect command came within "+fabrics.ConnectTimeout.String()+" of the transport connection.", []string{"port"}, nil)
	dQPReserved  = prometheus.NewDesc(prefix+"queue_pairs_reserved", "Queue pairs counted against limits.max_queue_pairs: connected, or being set up.", nil, nil)
	dQPLimit     = prometheus.NewDesc(prefix+"queue_pairs_limit", "limits.max_queue_pairs: the most queue pairs the daemon accepts at once.", nil, nil)
	dCtrlLimit   = prometheus.NewDesc(prefix+"controllers_limit", "subsystems[].max_controllers: the most controllers the subsystem accepts at once.", []string{"subsystem"}, nil)
	dANAState    = prometheus.NewDesc(prefix+"ana_state", "ANA state of each group on each port: 1 for the group's current state, 0 for the others. Listed: the groups of the namespaces served on the port and those the port gives a state.", []string{"port", "group", "state"}, nil)
	dCmdErrors   = prometheus.NewDesc(prefix+"command_errors_total", "Commands completed with an error status, by status code type.", []string{"subsystem", "type"}, nil)

	dBuildInfo  = prometheus.NewDesc(prefix+"build_info", "Build information.", []string{"version", "goversion"}, nil)
	dIOEngine   = prometheus.NewDesc(prefix+"io_engine", "The engine running file and block I/O (io_engine): 1 for the one in use.", []string{"engine"}, nil)
	dConfigGen  = prometheus.NewDesc(prefix+"config_generation", "Configuration generation: 1 at start, one more per reload or admin change applied.", nil, nil)
	dReloadOK   = prometheus.NewDesc(prefix+"config_last_reload_successful", "Whether the last reload applied in full (1) or was rejected (0).", nil, nil)
	dReloadTime = prometheus.NewDesc(prefix+"config_last_reload_timestamp_seconds", "When the configuration was last loaded.", nil, nil)
	dRegistered = prometheus.NewDesc(prefix+"registered_memory_bytes", "Memory registered with RDMA devices.", nil, nil)
	dPoller     = prometheus.NewDesc(prefix+"poller_seconds_total", "Time queue pair pollers spent busy (polling, including spinning) and asleep.", []string{"state"}, nil)
	dCMRejects  = prometheus.NewDesc(prefix+"rdma_connections_rejected_total", "RDMA CM connection requests refused before any NVMe Connect, by reason (no_resources: the queue pair could not be set up, usually locked memory).", []string{"port", "reason"}, nil)
	dDevEvents  = prometheus.NewDesc(prefix+"rdma_device_events_total", "RDMA device events: asynchronous verbs events and rdma_cm device removals and address changes.", []string{"device", "event"}, nil)
	dPoolSize   = prometheus.NewDesc(prefix+"rdma_buffer_pool_bytes", "rdma.buffer_pool: data buffer memory a device registered for all its queue pairs.", []string{"device"}, nil)
	dPoolInUse  = prometheus.NewDesc(prefix+"rdma_buffer_pool_in_use_bytes", "Buffer pool memory held by commands in flight and the queue pairs' small caches.", []string{"device"}, nil)
	dPoolWaits  = prometheus.NewDesc(prefix+"rdma_buffer_pool_waits_total", "Commands that found the buffer pool dry and waited their turn (none fails for it).", []string{"device"}, nil)
	dPoolShare  = prometheus.NewDesc(prefix+"rdma_buffer_pool_share_bytes", "Each I/O queue pair's share of the device's buffer pool for transfers over 32 KiB: the pool past the region kept for small transfers, split evenly, at least 2 MiB. A queue pair may always hold 2 MiB; more only while a quarter of that region stays free, and past its share only while nobody waits either.", []string{"device"}, nil)
	dPoolOver   = prometheus.NewDesc(prefix+"rdma_buffer_pool_over_share_total", "Commands that waited for their own queue pair's buffers to come back, past its share of the device's buffer pool: a host that holds its buffers (takes no responses) waits, not the others.", []string{"device"}, nil)
	dQPSetup    = prometheus.NewDesc(prefix+"rdma_queue_pair_setup_seconds", "Time from an RDMA connection request to its accept: setting up the queue pair.", nil, nil)
	dSRQEntries = prometheus.NewDesc(prefix+"rdma_srq_entries", "Receive buffers of a device's shared receive queues (io: rdma.receive_queue_depth per in-capsule size; admin).", []string{"device", "queue"}, nil)
	dSRQPosted  = prometheus.NewDesc(prefix+"rdma_srq_posted_entries", "Shared receive queue entries posted, free for hosts' commands; back at rdma_srq_entries once no command is in flight, lower means entries were lost.", []string{"device", "queue"}, nil)
	dSRQLimits  = prometheus.NewDesc(prefix+"rdma_srq_limit_events_total", "Times a shared receive queue fell below an eighth of its entries posted (hosts then wait on receiver-not-ready retries): raise rdma.receive_queue_depth.", []string{"device"}, nil)
	dSRQErrors  = prometheus.NewDesc(prefix+"rdma_srq_errors_total", "Shared receive queue errors the device reported; each disconnected the queue pairs on it.", []string{"device"}, nil)
	dOverruns   = prometheus.NewDesc(prefix+"rdma_queue_overruns_total", "Queues dropped because the host sent more commands than its queue size.", []string{"port"}, nil)
	dViolations = prometheus.NewDesc(prefix+"rdma_request_state_violations_total", "Request state transitions the RDMA transport refused; each disconnected its queue pair. Nonzero means a bug: report it.", nil, nil)
)

var statusTypes = []string{"generic", "command_specific", "media", "path", "4", "5", "6", "vendor"}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dReads, dWrites, dReadBytes, dWriteBytes, dReadTime, dWriteTime, dFlushes,
		dDiscards, dZeroes, dReadLatency, dWriteLatency, dNamespaceSz, dInFlight, dUnsettled, dResvUnavail, dControllers, dQueuePairs, dRefused, dAuthFailed, dKAExpired, dConnTimeout,
		dQPReserved, dQPLimit, dCtrlLimit, dANAState, dCmdErrors, dBuildInfo, dIOEngine, dConfigGen, dReloadOK, dReloadTime, dRegistered, dPoller, dCMRejects, dDevEvents, dViolations, dPoolSize, dPoolInUse, dPoolWaits, dPoolShare, dPoolOver, dQPSetup,
		dSRQEntries, dSRQPosted, dSRQLimits, dSRQErrors, dOverruns} {
		ch <- d
	}
	describeGateway(ch)
	describeTCP(ch)
	describeQoS(ch)
}

// histogram builds a cumulative Prometheus histogram from bucket counts.
func histogram(d *prometheus.Desc, counts [fabrics.LatencyHistSize]uint64, sumNanos uint64, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(fabrics.LatencyBuckets))
	var cum uint64
	for i, b := range fabrics.LatencyBuckets {
		cum += counts[i]
		buckets[b.Seconds()] = cum
	}
	total := cum + counts[len(fabrics.LatencyBuckets)]
	return prometheus.MustNewConstHistogram(d, total, time.Duration(sumNanos).Seconds(), buckets, labels...)
}

// emit sends constant metrics of one value type to a scrape.
type emit struct {
	ch chan<- prometheus.Metric
}

func (e emit) counter(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func (e emit) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	e := emit{ch}
	ports := c.Target.PortIDs()
	for _, s := range c.Target.Subsystems() {
		collectNamespaces(e, s)
		collectQoS(e, s)
		collectConnections(e, s, ports)
		collectSubsystem(e, s)
	}
	// Connects to a subsystem that does not exist: the NQN a host asked
	// for is not a label, or any host could grow the series without end.
	for k, n := range c.Target.Refused.Counts() {
		e.counter(dRefused, float64(n), "", strconv.Itoa(int(k.Port)), k.Reason)
	}
	for port, n := range connectTimeouts(c.Target) {
		e.counter(dConnTimeout, float64(n), strconv.Itoa(int(port)))
	}
	collectANA(e, c.Target, ports)
	collectGateway(e, c.Gateways)
	collectGroup(e, c.Group)
	reserved, limit := c.Target.QueuePairs()
	e.gauge(dQPReserved, float64(reserved))
	e.gauge(dQPLimit, float64(limit))
	e.gauge(dBuildInfo, 1, c.Version, runtime.Version())
	e.gauge(dIOEngine, 1, c.Target.IOEngine().String())
	c.collectConfig(e)
	collectRDMA(e)
	collectTCP(e)
}

// collectNamespaces sends the I/O counters and size of each namespace.
func collectNamespaces(e emit, s *fabrics.Subsystem) {
	for _, id := range s.NamespaceIDs() {
		n := s.Namespace(id)
		if n == nil {
			continue
		}
		st := s.NamespaceStats(n)
		l := []string{s.NQN, strconv.FormatUint(uint64(id), 10)}
		e.counter(dReads, float64(st.Reads), l...)
		e.counter(dWrites, float64(st.Writes), l...)
		e.counter(dReadBytes, float64(st.BytesRead), l...)
		e.counter(dWriteBytes, float64(st.BytesWritten), l...)
		e.counter(dReadTime, time.Duration(st.ReadNanos).Seconds(), l...)
		e.counter(dWriteTime, time.Duration(st.WriteNanos).Seconds(), l...)
		e.counter(dFlushes, float64(st.Flushes), l...)
		e.counter(dDiscards, float64(st.Discards), l...)
		e.counter(dZeroes, float64(st.Zeroes), l...)
		e.ch <- histogram(dReadLatency, st.ReadHist, st.ReadNanos, l...)
		e.ch <- histogram(dWriteLatency, st.WriteHist, st.WriteNanos, l...)
		e.gauge(dNamespaceSz, float64(n.Blocks()<<n.BlockShift), l...)
		e.gauge(dInFlight, float64(n.InFlight()), l...)
		e.gauge(dUnsettled, float64(n.UnsettledWrites()), l...)
		if n.ReservationShared() {
			v := 0.0
			if n.ReservationUnavailable() {
				v = 1
			}
			e.gauge(dResvUnavail, v, l...)
		}
	}
}

// collectConnections sends the controllers and queue pairs of s on every
// port it is reachable through, 0 where none is connected: a series that
// vanished with the last controller would read as "no data" rather than
// "no hosts" on a dashboard or in an alert.
func collectConnections(e emit, s *fabrics.Subsystem, ports []uint16) {
	ctrls, qps := map[uint16]int{}, map[uint16]int{}
	for _, id := range ports {
		if s.OnPort(id) {
			ctrls[id] = 0
		}
	}
	for _, ctl := range s.Controllers() {
		ctrls[ctl.Port.ID]++
		qps[ctl.Port.ID] += ctl.Queues()
	}
	for port, n := range ctrls {
		p := strconv.Itoa(int(port))
		e.gauge(dControllers, float64(n), s.NQN, p)
		e.gauge(dQueuePairs, float64(qps[port]), s.NQN, p)
	}
}

// collectANA sends the ANA state of every group on every port: of the
// groups of the namespaces each port serves, and of those it gives a state.
func collectANA(e emit, t *fabrics.Target, ports []uint16) {
	subs := t.Subsystems()
	for _, id := range ports {
		p := t.Port(id)
		if p == nil {
			continue
		}
		groups := map[uint32]bool{}
		for g := range p.ANAStates() {
			groups[g] = true
		}
		for _, s := range subs {
			if !s.OnPort(id) {
				continue
			}
			for _, nsid := range s.NamespaceIDs() {
				if ns := s.Namespace(nsid); ns != nil {
					groups[ns.ANAGroup()] = true
				}
			}
		}
		port := strconv.Itoa(int(id))
		for g := range groups {
			cur := p.ANAState(g)
			for _, st := range nvme.ANAStates {
				v := 0.0
				if st == cur {
					v = 1
				}
				e.gauge(dANAState, v, port, strconv.FormatUint(uint64(g), 10), st.String())
			}
		}
	}
}

// collectSubsystem sends the refusals, keep-alive expiries, controller
// limit and command errors of s.
func collectSubsystem(e emit, s *fabrics.Subsystem) {
	for k, n := range s.Stats.Refused.Counts() {
		e.counter(dRefused, float64(n), s.NQN, strconv.Itoa(int(k.Port)), k.Reason)
	}
	for k, n := range s.Stats.AuthFailures.Counts() {
		e.counter(dAuthFailed, float64(n), s.NQN, k.Host, k.Reason)
	}
	e.counter(dKAExpired, float64(s.Stats.KeepAliveExpired.Load()), s.NQN)
	maxCtrls, _ := s.Limits()
	e.gauge(dCtrlLimit, float64(maxCtrls), s.NQN)
	for t, n := range s.ErrorsByType() {
		if n > 0 {
			e.counter(dCmdErrors, float64(n), s.NQN, statusTypes[t])
		}
	}
}

// collectConfig sends the configuration generation and the last reload's
// outcome.
func (c *Collector) collectConfig(e emit) {
	gen, ok, when := c.Generation()
	e.gauge(dConfigGen, float64(gen))
	okv := 0.0
	if ok {
		okv = 1
	}
	e.gauge(dReloadOK, okv)
	e.gauge(dReloadTime, float64(when.Unix()))
}
