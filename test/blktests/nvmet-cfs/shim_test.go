package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shim is a mounted shim as the tests drive it: paths are relative to its
// mount point, and calls returns the daemon's calls since the last look.
type shim struct {
	t     *testing.T
	dir   string
	calls func() []string
}

// mountShim mounts c in a directory of its own, until the test ends.
func mountShim(t *testing.T, c *cfs, calls func() []string) *shim {
	t.Helper()
	needFUSE(t)
	dir := filepath.Join(t.TempDir(), "nvmet")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := mount(dir, c)
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return &shim{t: t, dir: dir, calls: calls}
}

func (s *shim) path(rel string) string { return filepath.Join(s.dir, rel) }

// readRaw is the attribute's whole content, its newline included.
func (s *shim) readRaw(rel string) string {
	s.t.Helper()
	b, err := os.ReadFile(s.path(rel))
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}

// read is the attribute's value, without its newline.
func (s *shim) read(rel string) string {
	s.t.Helper()
	return strings.TrimSuffix(s.readRaw(rel), "\n")
}

// write opens with O_TRUNC, as the shell's > does.
func (s *shim) write(rel, v string) error {
	return os.WriteFile(s.path(rel), []byte(v), 0o644)
}

func (s *shim) mkdir(rel string) error { return os.Mkdir(s.path(rel), 0o755) }

// names lists the directory.
func (s *shim) names(rel string) []string {
	s.t.Helper()
	ents, err := os.ReadDir(s.path(rel))
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// expect checks a step's error and the calls it made to the daemon.
func (s *shim) expect(what string, err, wantErr error, wantCalls ...string) {
	s.t.Helper()
	if !errors.Is(err, wantErr) {
		s.t.Errorf("%s: error %v, want %v", what, err, wantErr)
	}
	if got := s.calls(); !slices.Equal(got, wantCalls) {
		s.t.Errorf("%s: calls\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(wantCalls, "\n"))
	}
}
