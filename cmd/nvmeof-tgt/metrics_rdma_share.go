package main

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the RDMA buffer pool's shares, by device: no queue pair holds
// the pool from the others.
var (
	dPoolShare     = prometheus.NewDesc(prefix+"rdma_buffer_pool_share_bytes", "Each I/O queue pair's share of the device's buffer pool for transfers over 32 KiB: the pool past the region kept for small transfers, split evenly, at least 2 MiB. A queue pair may always hold 2 MiB; more only while a quarter of that region stays free, and past its share only while nobody waits either.", []string{"device"}, nil)
	dPoolOverShare = prometheus.NewDesc(prefix+"rdma_buffer_pool_over_share_total", "Commands that waited for their own queue pair's buffers to come back, past its share of the device's buffer pool: a host that holds its buffers (takes no responses) waits, not the others.", []string{"device"}, nil)
)

func describeRDMAShare(ch chan<- *prometheus.Desc) {
	ch <- dPoolShare
	ch <- dPoolOverShare
}

func collectRDMAShare(e emit) {
	for _, p := range rdma.Pools() {
		e.gauge(dPoolShare, float64(p.Share), p.Device)
		e.counter(dPoolOverShare, float64(p.OverShare), p.Device)
	}
}
