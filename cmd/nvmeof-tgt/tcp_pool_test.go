package main

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/tcp"
)

// tcp.buffer_pool sizes the TCP ports' shared pool at start; a reload
// that changes it waits for a restart, as rdma.buffer_pool does.
func TestTCPBufferPoolFromConfig(t *testing.T) {
	useFakeRDMA(t)
	t.Cleanup(func() { tcp.SetPoolBytes(tcp.DefaultPoolBytes) })
	dir := t.TempDir()
	d, err := start(parse(t, baseConfig(dir, "tcp: {buffer_pool: 8MiB}")), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.stop(time.Second) })
	if got := tcp.SharedPool().Limit(); got != 8<<20 {
		t.Fatalf("TCP pool %d bytes, want tcp.buffer_pool's 8MiB", got)
	}
	if err := d.apply(parse(t, baseConfig(dir, "tcp: {buffer_pool: 16MiB}"))); err != nil {
		t.Fatal(err)
	}
	if got := tcp.SharedPool().Limit(); got != 8<<20 || d.cfg.TCP.BufferPool != 8<<20 {
		t.Fatalf("after a reload to 16MiB: pool %d, running tcp.buffer_pool %d; want 8MiB until restart", got, d.cfg.TCP.BufferPool)
	}
}
