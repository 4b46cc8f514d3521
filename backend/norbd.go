//go:build norbd || !cgo

package backend

import "time"

func init() {
	Register("rbd", func(Options) (Backend, error) { return nil, ErrNoRBD })
}

// RetireClient: no clients without librados.
func RetireClient(RBDOptions) {}

// RadosLease needs librados; see rados_lease.go.
type RadosLease struct{}

func OpenRadosLease(RBDOptions, string, string, time.Duration) (*RadosLease, error) {
	return nil, ErrNoRBD
}

func (*RadosLease) Close()                                       {}
func (*RadosLease) Lock(bool) error                              { return ErrNoRBD }
func (*RadosLease) Unlock() error                                { return ErrNoRBD }
func (*RadosLease) Holder() (string, error)                      { return "", ErrNoRBD }
func (*RadosLease) SetHolder(string) error                       { return ErrNoRBD }
func (*RadosLease) Self() (string, error)                        { return "", ErrNoRBD }
func (*RadosLease) Fence(string) error                           { return ErrNoRBD }
func (*RadosLease) Watch(func()) error                           { return ErrNoRBD }
func (*RadosLease) Notify() error                                { return ErrNoRBD }
func (*RadosLease) WatchError() error                            { return ErrNoRBD }
func (*RadosLease) Unwatch()                                     {}
func (*RadosLease) LockShared() error                            { return ErrNoRBD }
func (*RadosLease) Lockers() ([]string, error)                   { return nil, ErrNoRBD }
func (*RadosLease) ReadAll() ([]byte, error)                     { return nil, ErrNoRBD }
func (*RadosLease) Replace(string, string, string, []byte) error { return ErrNoRBD }
