package main

import (
	"syscall"
	"testing"
)

// fakeLeaseObject grants every lock; its watch breaks when told.
type fakeLeaseObject struct {
	watches, unwatches int
	broken             bool
}

func (f *fakeLeaseObject) Lock(bool) error         { return nil }
func (f *fakeLeaseObject) Unlock() error           { return nil }
func (f *fakeLeaseObject) Holder() (string, error) { return "", nil }
func (f *fakeLeaseObject) SetHolder(string) error  { return nil }
func (f *fakeLeaseObject) Self() (string, error)   { return "10.0.0.1:0/1", nil }
func (f *fakeLeaseObject) Fence(string) error      { return nil }
func (f *fakeLeaseObject) Notify() error           { return nil }
func (f *fakeLeaseObject) Watch(func()) error      { f.watches++; f.broken = false; return nil }
func (f *fakeLeaseObject) Unwatch()                { f.unwatches++ }
func (f *fakeLeaseObject) WatchError() error {
	if f.broken {
		return syscall.ENOTCONN
	}
	return nil
}

// A watch that broke (its OSD connection lost) is set up again at the
// next lock call, so that a peer's release still reaches this gateway at
// once.
func TestRadosStoreRearmsABrokenWatch(t *testing.T) {
	f := &fakeLeaseObject{}
	s := &radosStore{l: f, poke: func() {}}
	for range 3 {
		if err := s.Lock(true); err != nil {
			t.Fatal(err)
		}
	}
	if f.watches != 1 || f.unwatches != 0 {
		t.Fatalf("healthy watch: %d watches, %d unwatches", f.watches, f.unwatches)
	}
	f.broken = true
	if err := s.Lock(true); err != nil {
		t.Fatal(err)
	}
	if f.watches != 2 || f.unwatches != 1 {
		t.Fatalf("after the watch broke: %d watches, %d unwatches, want 2 and 1", f.watches, f.unwatches)
	}
}
