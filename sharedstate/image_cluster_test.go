//go:build !norbd

package sharedstate

import (
	"errors"
	"os"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	cephtest "github.com/nvmeof-tgt/nvmeof-tgt/test/ceph"
)

// TestMain stops the cluster this test binary started for itself (none
// when NVMEOF_CEPH_ENV names a shared one): it must not outlive the run.
func TestMain(m *testing.M) {
	code := m.Run()
	cephtest.Stop()
	os.Exit(code)
}

// Two stores on one image, as two gateways have: the one that missed the
// other's change is refused with ErrReservationChanged and leaves the
// stored state alone; once it has read it, its change applies.
func TestImageResvStoreOnCluster(t *testing.T) {
	env := cephtest.Use(t)
	image := cephtest.CreateImage(t, env, "resv")
	open := func() *imageResvStore {
		b, err := backend.Open("rbd", backend.Options{BlockSize: 512, RBD: backend.RBDOptions{Pool: env["CEPH_POOL"], Image: image,
			Conf: env["CEPH_CONF"], User: env["CEPH_USER"], Keyring: env["CEPH_KEYRING"]}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return &imageResvStore{meta: b.(backend.ImageMetadata), image: image}
	}
	a, b := open(), open()
	for _, s := range []*imageResvStore{a, b} {
		if st, err := s.Load(); err != nil || !resvEqual(st, fabrics.ReservationState{}) {
			t.Fatalf("a new image: %+v, %v", st, err)
		}
	}
	held := fabrics.ReservationState{Generation: 1, Type: nvme.ResvWriteExclusive, Holder: [16]byte{1},
		Registrants: []fabrics.Registrant{{HostID: [16]byte{1}, Key: 0xa1}}}
	if err := a.Store(held); err != nil {
		t.Fatal(err)
	}
	stale := fabrics.ReservationState{Generation: 1, Registrants: []fabrics.Registrant{{HostID: [16]byte{2}, Key: 0xb2}}}
	if err := b.Store(stale); !errors.Is(err, fabrics.ErrReservationChanged) {
		t.Fatalf("the stale store's write: %v, want ErrReservationChanged", err)
	}
	got, err := b.Load()
	if err != nil || !resvEqual(got, held) {
		t.Fatalf("after the refused write: %+v, %v; want %+v", got, err, held)
	}
	got.Generation++
	got.Registrants = append(got.Registrants, fabrics.Registrant{HostID: [16]byte{2}, Key: 0xb2})
	if err := b.Store(got); err != nil {
		t.Fatalf("after reading the new state: %v", err)
	}
	if err := a.Store(held); !errors.Is(err, fabrics.ErrReservationChanged) {
		t.Fatalf("a, stale now: %v", err)
	}
}
