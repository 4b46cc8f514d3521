package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExamples keeps the shipped examples loadable: each must pass the
// same strict parse and validation `nvmeof-tgt -check` applies.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Guards against the directory moving or the files being renamed,
	// which would otherwise leave nothing to test.
	if len(files) < 4 {
		t.Fatalf("found %d examples in examples/, want at least 4: %q", len(files), files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Parse(data)
			if err != nil {
				t.Fatalf("%s:\n%v", f, err)
			}
			if len(c.Ports) == 0 || len(c.Subsystems) == 0 {
				t.Fatalf("%s: an example should serve at least one subsystem on one port", f)
			}
		})
	}
}
