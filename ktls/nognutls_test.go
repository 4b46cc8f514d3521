//go:build !cgo || notls

package ktls

import (
	"errors"
	"testing"
	"time"
)

// TestNoGnuTLS: a build without GnuTLS refuses every handshake before it
// touches the socket.
func TestNoGnuTLS(t *testing.T) {
	if Available() {
		t.Fatal("Available in a build without GnuTLS")
	}
	lookup := func(string) ([]byte, error) { t.Fatal("lookup called"); return nil, nil }
	if _, err := Server(-1, lookup, time.Now().Add(time.Second)); !errors.Is(err, ErrNoGnuTLS) {
		t.Fatalf("Server: %v, want ErrNoGnuTLS", err)
	}
}
