package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/metrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/metrics/metricstest"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp"
)

// tcp.buffer_pool sizes the TCP ports' shared pool at start; a reload
// that changes it waits for a restart, as rdma.buffer_pool does.
func TestTCPBufferPoolFromConfig(t *testing.T) {
	useFakeRDMA(t)
	t.Cleanup(func() { tcp.SetPoolBytes(tcp.DefaultPoolBytes) })
	dir := t.TempDir()
	d, err := Start(parse(t, baseConfig(dir, "tcp: {buffer_pool: 8MiB}")), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(time.Second) })
	if got := tcp.SharedPool().Limit(); got != 8<<20 {
		t.Fatalf("TCP pool %d bytes, want tcp.buffer_pool's 8MiB", got)
	}
	if err := d.Apply(parse(t, baseConfig(dir, "tcp: {buffer_pool: 16MiB}"))); err != nil {
		t.Fatal(err)
	}
	if got := tcp.SharedPool().Limit(); got != 8<<20 || d.cfg.TCP.BufferPool != 8<<20 {
		t.Fatalf("after a reload to 16MiB: pool %d, running tcp.buffer_pool %d; want 8MiB until restart", got, d.cfg.TCP.BufferPool)
	}
}

// tcp.data_timeout_seconds sets the TCP data deadline at start, and the
// connections it closes are counted by port.
func TestTCPDataTimeoutFromConfig(t *testing.T) {
	useFakeRDMA(t)
	t.Cleanup(func() { tcp.SetDataTimeout(tcp.DefaultDataTimeout) })
	dir := t.TempDir()
	port := freeTCPPort(t)
	cfg := parse(t, baseConfig(dir, "tcp: {data_timeout_seconds: 3}"))
	cfg.Ports = append(cfg.Ports, parse(t, fmt.Sprintf("ports: [{id: 2, transport: tcp, address: 127.0.0.1, port: %d}]\nsubsystems: []", port)).Ports...)
	d, err := Start(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(time.Second) })
	if got := tcp.DataTimeout(); got != 3*time.Second {
		t.Fatalf("TCP data timeout %v, want tcp.data_timeout_seconds' 3s", got)
	}
	stats := tcp.Stats()[2]
	if stats == nil {
		t.Fatal("no counters for TCP port 2")
	}
	stats.DataTimeouts.Add(1)
	want := float64(stats.DataTimeouts.Load())
	var got []float64
	for _, s := range metricstest.Scrape(t, &metrics.Collector{Target: d.target, Generation: d.Generation}, "nvmeof_tgt_tcp_data_timeouts_total") {
		if s.Labels["port"] == "2" {
			got = append(got, s.Value)
		}
	}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("nvmeof_tgt_tcp_data_timeouts_total{port=\"2\"} %v, want %v", got, want)
	}
}

// tcp.data_timeout_seconds changes with a reload, and back to the default
// when the key goes; tcp.buffer_pool waits for a restart.
func TestTCPDataTimeoutReloads(t *testing.T) {
	useFakeRDMA(t)
	t.Cleanup(func() { tcp.SetDataTimeout(tcp.DefaultDataTimeout) })
	dir := t.TempDir()
	path := filepath.Join(dir, "tgt.yaml")
	write := func(extra string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(baseConfig(dir, extra)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tcp: {data_timeout_seconds: 3}")
	d, err := Start(parse(t, baseConfig(dir, "tcp: {data_timeout_seconds: 3}")), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(time.Second) })
	for _, step := range []struct {
		extra string
		want  time.Duration
	}{
		{"tcp: {data_timeout_seconds: 7, buffer_pool: 32MiB}", 7 * time.Second},
		{"", tcp.DefaultDataTimeout},
	} {
		write(step.extra)
		if err := d.Reload(path); err != nil {
			t.Fatalf("reload with %q: %v", step.extra, err)
		}
		if got := tcp.DataTimeout(); got != step.want {
			t.Fatalf("after a reload with %q: data timeout %v, want %v", step.extra, got, step.want)
		}
	}
}
