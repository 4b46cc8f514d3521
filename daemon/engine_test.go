package daemon

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend/uring"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
)

func TestChooseEngine(t *testing.T) {
	if err := uring.Probe(); err != nil {
		t.Fatalf("these tests need io_uring: %v", err)
	}
	log := quietLogger().WithField("test", t.Name())
	for want, engine := range map[string]fabrics.IOEngine{
		"auto": fabrics.EngineIOURing, "io_uring": fabrics.EngineIOURing, "threads": fabrics.EngineThreads,
	} {
		got, err := chooseEngine(want, log)
		if err != nil || got != engine {
			t.Errorf("io_engine %s: %v %v, want %v", want, got, err, engine)
		}
	}
}

// A reload cannot switch the engine of queues already running: the
// running configuration keeps the old engine until a restart.
func TestIOEngineChangeWaitsForRestart(t *testing.T) {
	_, dir, d := startBase(t)
	if d.target.IOEngine() != fabrics.EngineIOURing || d.cfg.IOEngine != "auto" {
		t.Fatalf("engine at start %v (%q), want io_uring (auto)", d.target.IOEngine(), d.cfg.IOEngine)
	}
	if err := d.Apply(parse(t, baseConfig(dir, "io_engine: threads"))); err != nil {
		t.Fatal(err)
	}
	if d.target.IOEngine() != fabrics.EngineIOURing || d.cfg.IOEngine != "auto" {
		t.Fatalf("after a reload to threads: %v (%q), want io_uring (auto) until restart", d.target.IOEngine(), d.cfg.IOEngine)
	}
}

// Where the kernel refuses io_uring (kernel.io_uring_disabled: EPERM),
// auto falls back to threads and io_uring by name refuses to start.
func TestChooseEngineWithoutIOURing(t *testing.T) {
	probeIOURing = func() error { return fmt.Errorf("%w: io_uring_setup: %w", uring.ErrUnsupported, syscall.EPERM) }
	t.Cleanup(func() { probeIOURing = uring.Probe })
	log := quietLogger().WithField("test", t.Name())
	if got, err := chooseEngine("auto", log); err != nil || got != fabrics.EngineThreads {
		t.Fatalf("auto: %v %v, want threads", got, err)
	}
	_, err := chooseEngine("io_uring", log)
	if err == nil || !strings.Contains(err.Error(), "io_engine: io_uring cannot be used") || !errors.Is(err, syscall.EPERM) {
		t.Fatalf("io_uring without it: %v, want an io_engine error wrapping EPERM", err)
	}
}
