package sharedstate

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

func TestFileResvStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	st := &fileResvStore{path: filepath.Join(dir, "sub", "ns-1.json")}
	if got, err := st.Load(); err != nil || got.Generation != 0 || got.Registrants != nil {
		t.Fatalf("missing file loads %+v %v", got, err)
	}
	want := fabrics.ReservationState{Generation: 7, Type: 1, Holder: [16]byte{0xaa, 1}, PTPL: true,
		Registrants: []fabrics.Registrant{{HostID: [16]byte{0xaa, 1}, Key: 1 << 63}, {HostID: [16]byte{0xbb}, Key: 2}}}
	if err := st.Store(want); err != nil {
		t.Fatal(err)
	}
	got, err := st.Load()
	if err != nil || got.Generation != 7 || got.Type != 1 || got.Holder != want.Holder || !got.PTPL ||
		!slices.Equal(got.Registrants, want.Registrants) {
		t.Fatalf("loaded %+v %v, want %+v", got, err, want)
	}
	if fi, err := os.Stat(st.path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file %v %v", fi, err)
	}
	os.WriteFile(st.path, []byte(`{"registrants":[{"host_id":"zz"}]}`), 0o600)
	if _, err := st.Load(); err == nil {
		t.Fatal("a bad host id loaded")
	}
}

// setupReservations restores a file namespace's state that had PTPL, and
// not one without; reservations: false turns the commands off.
func TestSetupReservationsPTPL(t *testing.T) {
	dir := t.TempDir()
	nc := config.Namespace{NSID: 1, Backend: "file", Path: filepath.Join(dir, "img"), Size: 1 << 20}
	open := func(nc config.Namespace) *fabrics.Namespace {
		t.Helper()
		b, err := backend.Open("file", backend.Options{Path: nc.Path, Size: 1 << 20, Buffered: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		ns, err := fabrics.NewNamespace(1, b, false, [16]byte{1})
		if err != nil {
			t.Fatal(err)
		}
		if err := SetupReservations(ns, "nqn.a:b/c", nc, dir, logrus.NewEntry(quietLogger())); err != nil {
			t.Fatal(err)
		}
		return ns
	}
	st := &fileResvStore{path: filepath.Join(dir, "nqn.a:b%2Fc-1.json")}
	held := fabrics.ReservationState{Generation: 3, Type: 2, Holder: [16]byte{5}, PTPL: true,
		Registrants: []fabrics.Registrant{{HostID: [16]byte{5}, Key: 9}}}
	if err := st.Store(held); err != nil {
		t.Fatal(err)
	}
	if got := open(nc).Reservation(); got.Type != 2 || got.Generation != 3 || len(got.Registrants) != 1 {
		t.Fatalf("with PTPL the restart restores %+v", got)
	}
	held.PTPL = false
	st.Store(held)
	if got := open(nc).Reservation(); got.Type != 0 || len(got.Registrants) != 0 {
		t.Fatalf("without PTPL the restart restores %+v", got)
	}
	nc.Reservations = config.SwitchOff
	if ns := open(nc); ns.ReservationsEnabled() {
		t.Fatal("reservations: false left them on")
	}
}

func quietLogger() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}
