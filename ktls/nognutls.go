//go:build !cgo || notls

package ktls

import "time"

// Available reports whether this build has GnuTLS, and so Server.
func Available() bool { return false }

func handshake(int, func(string) ([]byte, error), time.Time) (*Session, *keyMaterial, error) {
	return nil, nil, ErrNoGnuTLS
}
