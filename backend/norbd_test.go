//go:build norbd

package backend

import (
	"errors"
	"testing"
)

func TestNoRBD(t *testing.T) {
	if _, err := Open("rbd", Options{}); !errors.Is(err, ErrNoRBD) {
		t.Fatalf("rbd in a norbd build: %v, want ErrNoRBD", err)
	}
}
