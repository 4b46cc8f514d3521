package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
)

func TestLifetimeAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	log := logrus.NewEntry(logrus.New())
	steps := []struct {
		clean                bool // the run ends with a clean shutdown
		wantCycles, wantLost uint64
	}{
		{true, 1, 0},
		{false, 2, 0}, // ends like kill -9
		{true, 3, 1},  // ...which this start counts
		{true, 4, 1},
	}
	for i, s := range steps {
		l := openLifetime(path, log)
		got := l.Lifetime()
		if got.PowerCycles != s.wantCycles || got.UnsafeShutdowns != s.wantLost {
			t.Fatalf("start %d: power cycles %d unsafe shutdowns %d, want %d and %d",
				i+1, got.PowerCycles, got.UnsafeShutdowns, s.wantCycles, s.wantLost)
		}
		if s.clean {
			l.close()
		} else {
			close(l.done) // the process dies: nothing more is written
			l.wg.Wait()
		}
	}
}

func TestLifetimeUnreadableFileStartsOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := openLifetime(path, logrus.NewEntry(logrus.New()))
	defer l.close()
	if got := l.Lifetime(); got.PowerCycles != 1 {
		t.Fatalf("power cycles %d after a corrupt state file, want 1", got.PowerCycles)
	}
	if st, err := readLifetime(path); err != nil || !st.Running {
		t.Fatalf("state file not rewritten: %+v %v", st, err)
	}
}
