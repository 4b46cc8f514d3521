package sharedstate

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// ReservationDir is where the reservation state of file and block
// namespaces lives: beside the state file, which the daemon already
// keeps across restarts.
func ReservationDir(stateFile string) string {
	if stateFile == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(stateFile), "reservations")
}

// SetupReservations turns the namespace's reservations on or off as
// configured and gives the namespace a store: an rbd namespace keeps its
// state in the image, shared with every gateway that exports it
// (imageResvStore); file and block namespaces in a file, so that it
// persists through a restart when a host set PTPL.
func SetupReservations(ns *fabrics.Namespace, nqn string, nc config.Namespace, dir string, log *logrus.Entry) error {
	if err := ns.SetReservations(nc.Reservations.On()); err != nil {
		return err
	}
	if nc.SharedReservations.On {
		return setupSharedReservations(ns, nqn, nc, log)
	}
	if m, ok := ns.Backend.(backend.ImageMetadata); ok {
		return setupImageReservations(ns, m, nc)
	}
	if dir == "" || (nc.Backend != "file" && nc.Backend != "block") {
		return nil
	}
	st := &fileResvStore{path: filepath.Join(dir, url.PathEscape(nqn)+"-"+fmt.Sprint(nc.NSID)+".json")}
	if err := ns.SetReservationStore(st); err != nil {
		// A state that cannot be read may hold a persistent reservation:
		// starting without it would drop a host's fencing.
		hint := "remove the file to start without reservations"
		if errors.Is(err, fs.ErrPermission) {
			hint = "give the daemon's user access to " + dir + ", or set state_file to a directory it owns"
		}
		return fmt.Errorf("reservation state %s: %w (%s)", st.path, err, hint)
	}
	return nil
}

// fileResvStore keeps one namespace's reservation state in one file,
// replaced atomically (config.WriteFileAtomic) before the command completes.
type fileResvStore struct{ path string }

// resvFile is the file's layout.
type resvFile struct {
	Generation  uint32         `json:"generation"`
	Type        uint8          `json:"type"`
	Holder      string         `json:"holder,omitempty"` // host ID, hex
	PTPL        bool           `json:"ptpl"`
	Registrants []resvFileHost `json:"registrants"`
}

type resvFileHost struct {
	HostID string `json:"host_id"`
	Key    uint64 `json:"key"`
}

func (f *fileResvStore) Load() (fabrics.ReservationState, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return fabrics.ReservationState{}, nil
	}
	if err != nil {
		return fabrics.ReservationState{}, err
	}
	var rf resvFile
	if err := json.Unmarshal(b, &rf); err != nil {
		return fabrics.ReservationState{}, err
	}
	return rf.state()
}

func (f *fileResvStore) Store(st fabrics.ReservationState) error {
	b, err := json.MarshalIndent(resvFileOf(st), "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		return err
	}
	return config.WriteFileAtomic(f.path, append(b, '\n'))
}

// resvFileOf is st in the file's layout, which the image metadata's
// record (resvRecord) shares.
func resvFileOf(st fabrics.ReservationState) resvFile {
	rf := resvFile{Generation: st.Generation, Type: st.Type, PTPL: st.PTPL, Registrants: []resvFileHost{}}
	if st.Type != 0 {
		rf.Holder = hex.EncodeToString(st.Holder[:])
	}
	for _, r := range st.Registrants {
		rf.Registrants = append(rf.Registrants, resvFileHost{hex.EncodeToString(r.HostID[:]), r.Key})
	}
	return rf
}

// state is the reservation state rf holds; a host ID that is not 32 hex
// digits is an error.
func (rf resvFile) state() (fabrics.ReservationState, error) {
	var st fabrics.ReservationState
	var err error
	st.Generation, st.Type, st.PTPL = rf.Generation, rf.Type, rf.PTPL
	if rf.Holder != "" {
		if st.Holder, err = parseHostID(rf.Holder); err != nil {
			return st, fmt.Errorf("holder: %w", err)
		}
	}
	for _, r := range rf.Registrants {
		id, err := parseHostID(r.HostID)
		if err != nil {
			return st, err
		}
		st.Registrants = append(st.Registrants, fabrics.Registrant{HostID: id, Key: r.Key})
	}
	return st, nil
}

func parseHostID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("host id %q is not 32 hex digits", s)
	}
	copy(id[:], b)
	return id, nil
}
