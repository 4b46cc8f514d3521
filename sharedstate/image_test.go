package sharedstate

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// A state survives the record exactly, and the record is compact JSON
// with its version, as rbd image-meta get shows it.
func TestResvRecordRoundTrip(t *testing.T) {
	a, b := [16]byte{0xaa, 1}, [16]byte{0xbb}
	for _, st := range []fabrics.ReservationState{
		{},
		{Generation: 2, PTPL: true, Registrants: []fabrics.Registrant{{HostID: b, Key: 1 << 63}}},
		{Generation: 7, Type: nvme.ResvWriteExclusive, Holder: a, Registrants: []fabrics.Registrant{{HostID: a, Key: 0xa}, {HostID: b, Key: 0xb}}},
		// Types 5 and 6 keep the acquirer, registered or not.
		{Generation: 9, Type: nvme.ResvExclusiveAccessAllRegs, Holder: a, Registrants: []fabrics.Registrant{{HostID: b, Key: 2}}},
	} {
		v := encodeResvRecord(st, "1f2e3d4c5b6a")
		if !bytes.HasPrefix(v, []byte(`{"v":2,"image":"1f2e3d4c5b6a",`)) || bytes.ContainsAny(v, "\n ") {
			t.Fatalf("record %s: want compact JSON that starts with its version and image", v)
		}
		got, image, err := decodeResvRecord(v)
		if err != nil || !resvEqual(got, st) || image != "1f2e3d4c5b6a" {
			t.Fatalf("%+v stored as %s reads back as %+v of %q, %v", st, v, got, image, err)
		}
	}
	if st, image, err := decodeResvRecord(nil); err != nil || !resvEqual(st, fabrics.ReservationState{}) || image != "" {
		t.Fatalf("no record: %+v of %q, %v", st, image, err)
	}
	// Version 1, before the image's ID: still read.
	st, image, err := decodeResvRecord([]byte(`{"v":1,"generation":4,"type":0,"ptpl":true,"registrants":[]}`))
	if err != nil || st.Generation != 4 || !st.PTPL || image != "" {
		t.Fatalf("a version 1 record: %+v of %q, %v", st, image, err)
	}
}

// A record that is not a consistent state of the version this daemon
// reads is an error, never a guess.
func TestResvRecordRefusesBadValues(t *testing.T) {
	const a = "aa010000000000000000000000000000"
	for name, v := range map[string]string{
		"empty":               ``,
		"not json":            `nvme`,
		"newer version":       `{"v":3,"image":"1f2e","generation":1,"type":0,"ptpl":false,"registrants":[]}`,
		"v2 without image":    `{"v":2,"generation":1,"type":0,"ptpl":false,"registrants":[]}`,
		"v1 with an image":    `{"v":1,"image":"1f2e","generation":1,"type":0,"ptpl":false,"registrants":[]}`,
		"no version":          `{"generation":1,"type":0,"ptpl":false,"registrants":[]}`,
		"unknown field":       `{"v":1,"generation":1,"type":0,"ptpl":false,"registrants":[],"owner":"x"}`,
		"trailing data":       `{"v":1,"generation":1,"type":0,"ptpl":false,"registrants":[]}{}`,
		"type 7":              `{"v":1,"generation":1,"type":7,"holder":"` + a + `","ptpl":false,"registrants":[{"host_id":"` + a + `","key":1}]}`,
		"short host id":       `{"v":1,"generation":1,"type":0,"ptpl":false,"registrants":[{"host_id":"aa01","key":1}]}`,
		"registered twice":    `{"v":1,"generation":1,"type":0,"ptpl":false,"registrants":[{"host_id":"` + a + `","key":1},{"host_id":"` + a + `","key":2}]}`,
		"holder unregistered": `{"v":1,"generation":1,"type":1,"holder":"` + a + `","ptpl":false,"registrants":[]}`,
		"no holder":           `{"v":1,"generation":1,"type":2,"ptpl":false,"registrants":[{"host_id":"` + a + `","key":1}]}`,
		"holder of none":      `{"v":1,"generation":1,"type":0,"holder":"` + a + `","ptpl":false,"registrants":[]}`,
		"all regs, none":      `{"v":1,"generation":1,"type":5,"ptpl":false,"registrants":[]}`,
		"negative key":        `{"v":1,"generation":1,"type":0,"ptpl":false,"registrants":[{"host_id":"` + a + `","key":-1}]}`,
	} {
		if st, _, err := decodeResvRecord([]byte(v)); err == nil {
			t.Errorf("%s: %s read as %+v", name, v, st)
		}
	}
}

func resvEqual(a, b fabrics.ReservationState) bool {
	return a.Generation == b.Generation && a.Type == b.Type && a.Holder == b.Holder && a.PTPL == b.PTPL &&
		slices.Equal(a.Registrants, b.Registrants)
}

// Whatever the image holds, decoding returns an error or a state that
// stores as a record reading back the same.
func FuzzResvRecord(f *testing.F) {
	f.Add(encodeResvRecord(fabrics.ReservationState{Generation: 3, Type: 1, Holder: [16]byte{1},
		Registrants: []fabrics.Registrant{{HostID: [16]byte{1}, Key: 5}}}, "1f2e"))
	f.Add([]byte(`{"v":1,"generation":1,"type":5,"ptpl":true,"registrants":[{"host_id":"00000000000000000000000000000001","key":18446744073709551615}]}`))
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		st, image, err := decodeResvRecord(v)
		if err != nil {
			return
		}
		if image == "" {
			image = "1f2e" // a version 1 record, stored again as version 2
		}
		again, imageAgain, err := decodeResvRecord(encodeResvRecord(st, image))
		if err != nil || !resvEqual(again, st) || imageAgain != image {
			t.Fatalf("%s read as %+v of %q, stored and read again as %+v of %q, %v", v, st, image, again, imageAgain, err)
		}
	})
}

// imageMeta is an image's metadata in memory, with the compare-and-set
// of the OSDs.
type imageMeta struct {
	vals map[string][]byte
	id   string
}

func (m *imageMeta) Metadata(key string) ([]byte, error) { return m.vals[key], nil }
func (m *imageMeta) ImageID() (string, error)            { return m.id, nil }

func (m *imageMeta) CompareAndSetMetadata(key string, old, value []byte) error {
	if !bytes.Equal(m.vals[key], old) {
		return fmt.Errorf("%s: %w", key, syscall.ECANCELED)
	}
	m.vals[key] = slices.Clone(value)
	return nil
}

// metaBackend is a file backend with an image's metadata, as rbd has.
type metaBackend struct {
	backend.Backend
	*imageMeta
}

// An rbd namespace gets its image's store: a state without PTPL is
// restored (another gateway may have served the image), PTPL is
// accepted, and a bad record stops the namespace with an error that
// names the image and the way out.
func TestSetupImageReservations(t *testing.T) {
	m := &imageMeta{vals: map[string][]byte{}, id: "1f2e"}
	nc := config.Namespace{NSID: 1, Backend: "rbd", Pool: "pool", Image: "img"}
	open := func() (*fabrics.Namespace, error) {
		t.Helper()
		b, err := backend.Open("file", backend.Options{Path: filepath.Join(t.TempDir(), "img"), Size: 1 << 20, Buffered: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		ns, err := fabrics.NewNamespace(1, metaBackend{b, m}, false, [16]byte{1})
		if err != nil {
			t.Fatal(err)
		}
		return ns, SetupReservations(ns, "nqn.a:b", nc, "", logrus.NewEntry(quietLogger()))
	}
	held := fabrics.ReservationState{Generation: 3, Type: 1, Holder: [16]byte{5}, Registrants: []fabrics.Registrant{{HostID: [16]byte{5}, Key: 9}}}
	m.vals[resvImageMetaKey] = encodeResvRecord(held, "1f2e")
	ns, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if got := ns.Reservation(); !resvEqual(got, held) {
		t.Fatalf("restored %+v, want %+v without PTPL", got, held)
	}
	if !ns.ReservationPersistent() {
		t.Fatal("an rbd namespace refuses PTPL")
	}
	m.vals[resvImageMetaKey] = []byte("{")
	if _, err := open(); err == nil || !strings.Contains(err.Error(), "rbd image-meta remove pool/img "+resvImageMetaKey) {
		t.Fatalf("bad record: %v", err)
	}
}

// A store that last saw an older value is refused with
// ErrReservationChanged, and stores once it has read the new one.
func TestImageResvStoreRefusesStale(t *testing.T) {
	m := &imageMeta{vals: map[string][]byte{}, id: "1f2e"}
	a, b := &imageResvStore{meta: m}, &imageResvStore{meta: m}
	a.Load()
	b.Load()
	if err := a.Store(fabrics.ReservationState{Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Store(fabrics.ReservationState{Generation: 2}); !errors.Is(err, fabrics.ErrReservationChanged) {
		t.Fatalf("a store from a stale value: %v", err)
	}
	if st, err := b.Load(); err != nil || st.Generation != 1 {
		t.Fatalf("b reads %+v, %v", st, err)
	}
	if err := b.Store(fabrics.ReservationState{Generation: 2}); err != nil {
		t.Fatalf("after a load: %v", err)
	}
}

// A clone, a copy or a migrated image carries its source's record in its
// metadata: the store reads it as no reservation (the source's hosts are
// not this image's), and the first change replaces it with this image's
// own. A record without an image ID (version 1) is read as before.
func TestImageResvStoreIgnoresAnotherImagesRecord(t *testing.T) {
	held := fabrics.ReservationState{Generation: 3, Type: 1, Holder: [16]byte{5}, Registrants: []fabrics.Registrant{{HostID: [16]byte{5}, Key: 9}}}
	m := &imageMeta{vals: map[string][]byte{resvImageMetaKey: encodeResvRecord(held, "parent")}, id: "clone"}
	s := &imageResvStore{meta: m}
	if st, err := s.Load(); err != nil || !resvEqual(st, fabrics.ReservationState{}) {
		t.Fatalf("the parent's record read by its clone: %+v, %v", st, err)
	}
	if err := s.Store(fabrics.ReservationState{Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if st, image, err := decodeResvRecord(m.vals[resvImageMetaKey]); err != nil || st.Generation != 1 || image != "clone" {
		t.Fatalf("after the clone's first change: %+v of %q, %v", st, image, err)
	}
	m.vals[resvImageMetaKey] = []byte(`{"v":1,"generation":4,"type":0,"ptpl":true,"registrants":[]}`)
	if st, err := (&imageResvStore{meta: m}).Load(); err != nil || st.Generation != 4 {
		t.Fatalf("a version 1 record: %+v, %v", st, err)
	}
}
