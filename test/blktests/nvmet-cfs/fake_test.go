package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/test/blktests/nvmet-cfs/fakedaemon"
)

// startFake serves a fake daemon's admin socket from state; takeCalls
// returns the calls that changed something since the last look.
func startFake(t *testing.T, state string) (d *fakedaemon.Daemon, sock string, takeCalls func() []string) {
	t.Helper()
	tmp := t.TempDir()
	statePath, logPath := filepath.Join(tmp, "state.json"), filepath.Join(tmp, "log")
	if err := os.WriteFile(statePath, []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	sock = filepath.Join(tmp, "ctl.sock")
	d, err := fakedaemon.Listen(sock, statePath, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, sock, func() []string {
		b, _ := os.ReadFile(logPath)
		os.Remove(logPath)
		if len(b) == 0 {
			return nil
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
}
