package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// lifetimeState is the state file: what the SMART log reports about the
// daemon's life, kept across restarts as a drive keeps it across power
// cycles.
type lifetimeState struct {
	PowerCycles     uint64 `json:"power_cycles"`
	UnsafeShutdowns uint64 `json:"unsafe_shutdowns"`
	PowerOnSeconds  uint64 `json:"power_on_seconds"`
	// Running is true from start to a clean shutdown: found true at
	// start, the last run ended by a crash, kill -9 or power loss.
	Running bool `json:"running"`
}

// lifetimeSaveInterval bounds the power-on time a crash forgets.
const lifetimeSaveInterval = 10 * time.Minute

// lifetime keeps the state file up to date while the daemon runs.
type lifetime struct {
	path    string
	log     *logrus.Entry
	started time.Time
	mu      sync.Mutex
	state   lifetimeState
	done    chan struct{}
	wg      sync.WaitGroup
}

// openLifetime reads the state file, counts this start (and an unclean end
// of the last run), marks the daemon running and keeps saving its power-on
// time. A missing file starts from zero; one that cannot be read or
// written only costs the counters, never the service, so it is logged.
func openLifetime(path string, log *logrus.Entry) *lifetime {
	l := &lifetime{path: path, log: log.WithField("state_file", path), started: time.Now(), done: make(chan struct{})}
	st, err := readLifetime(path)
	if err != nil {
		l.log.WithError(err).Warn("cannot read the state file; SMART power cycles, power-on hours and unsafe shutdowns start from zero")
	}
	if st.Running {
		st.UnsafeShutdowns++
		l.log.Warn("the last run did not shut down cleanly; counted as an unsafe shutdown")
	}
	st.PowerCycles++
	st.Running = true
	l.state = st
	l.save()
	l.wg.Add(1)
	go l.tick()
	return l
}

func readLifetime(path string) (lifetimeState, error) {
	var st lifetimeState
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return lifetimeState{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// Lifetime is what the target reports: earlier runs' power-on time, with
// this run's added by the target itself.
func (l *lifetime) Lifetime() fabrics.Lifetime {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fabrics.Lifetime{
		PowerCycles:     l.state.PowerCycles,
		UnsafeShutdowns: l.state.UnsafeShutdowns,
		PowerOn:         time.Duration(l.state.PowerOnSeconds) * time.Second,
	}
}

func (l *lifetime) tick() {
	defer l.wg.Done()
	t := time.NewTicker(lifetimeSaveInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.save()
		case <-l.done:
			return
		}
	}
}

// save writes the state with this run's power-on time so far, atomically
// (a temporary file renamed over the old one, both synced).
func (l *lifetime) save() {
	l.mu.Lock()
	st := l.state
	l.mu.Unlock()
	st.PowerOnSeconds += uint64(time.Since(l.started) / time.Second)
	if err := writeLifetime(l.path, st); err != nil {
		l.log.WithError(err).Warn("cannot write the state file; SMART lifetime counters will not survive a restart")
	}
}

func writeLifetime(path string, st lifetimeState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return config.WriteFileAtomic(path, append(b, '\n'))
}

// close records a clean shutdown.
func (l *lifetime) close() {
	close(l.done)
	l.wg.Wait()
	l.mu.Lock()
	l.state.Running = false
	l.mu.Unlock()
	l.save()
}
