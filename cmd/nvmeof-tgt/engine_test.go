package main

import (
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
	if err := d.apply(parse(t, baseConfig(dir, "io_engine: threads"))); err != nil {
		t.Fatal(err)
	}
	if d.target.IOEngine() != fabrics.EngineIOURing || d.cfg.IOEngine != "auto" {
		t.Fatalf("after a reload to threads: %v (%q), want io_uring (auto) until restart", d.target.IOEngine(), d.cfg.IOEngine)
	}
}
