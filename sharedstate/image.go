package sharedstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// The reservation state of an rbd namespace lives in its image's metadata
// (rbd image-meta get POOL/IMAGE nvmeof-tgt.reservation): every gateway
// that exports the image reads and writes the one state, which goes with
// the image (deleted with it, kept through a rename) and needs no object
// or capability beyond the image's. Each change is a compare-and-set on
// the value this daemon last read or wrote, on the OSDs before the command
// completes: a daemon that missed a change (a gateway that lost its group
// and still answers a command) is refused, and the engine computes its
// change again on the stored state.
const resvImageMetaKey = "nvmeof-tgt.reservation"

// setupImageReservations gives an rbd namespace its image's store and
// the state stored there, PTPL or not: another gateway may have served
// the image meanwhile.
func setupImageReservations(ns *fabrics.Namespace, m backend.ImageMetadata, nc config.Namespace) error {
	image := nc.Pool + "/" + nc.Image
	if nc.RadosNamespace != "" {
		image = nc.Pool + "/" + nc.RadosNamespace + "/" + nc.Image
	}
	if err := ns.SetReservationStore(NewImageStore(m, image)); err != nil {
		// Starting without it could drop a host's fencing.
		return fmt.Errorf("reservation state: %w (repair the value, or remove it to start without reservations: rbd image-meta remove %s %s)", err, image, resvImageMetaKey)
	}
	return nil
}

// NewImageStore is the reservation store of the rbd image m, named image
// in errors: what SetupReservations gives an rbd namespace.
func NewImageStore(m backend.ImageMetadata, image string) fabrics.SharedReservationStore {
	return &imageResvStore{meta: m, image: image}
}

// imageResvStore is an rbd namespace's fabrics.SharedReservationStore.
// The engine calls Load and Store one at a time (under the namespace's
// reservation mutex), which guards seen.
type imageResvStore struct {
	meta  backend.ImageMetadata
	image string // for errors
	seen  []byte // the value last read or written; nil: not set
	id    string // the image's ID, once read
}

// imageID is the image's ID, which the record carries: a clone, a copy
// or a migrated image copies its source's metadata, reservation record
// included, but has an ID of its own.
func (s *imageResvStore) imageID() (string, error) {
	if s.id == "" {
		id, err := s.meta.ImageID()
		if err != nil {
			return "", err
		}
		if id == "" {
			return "", fmt.Errorf("image %s has no ID", s.image)
		}
		s.id = id
	}
	return s.id, nil
}

func (s *imageResvStore) SharedReservations() {}

func (s *imageResvStore) Load() (fabrics.ReservationState, error) {
	v, err := s.meta.Metadata(resvImageMetaKey)
	if err != nil {
		return fabrics.ReservationState{}, err
	}
	st, of, err := decodeResvRecord(v)
	if err != nil {
		return st, fmt.Errorf("image %s metadata %s: %w", s.image, resvImageMetaKey, err)
	}
	id, err := s.imageID()
	if err != nil {
		return fabrics.ReservationState{}, err
	}
	s.seen = v // the next store replaces it, whoever's it is
	if of != "" && of != id {
		// Copied with the metadata from the image this one was cloned,
		// copied or migrated from: that image's hosts, not this one's.
		return fabrics.ReservationState{}, nil
	}
	return st, nil
}

func (s *imageResvStore) Store(st fabrics.ReservationState) error {
	id, err := s.imageID()
	if err != nil {
		return err
	}
	v := encodeResvRecord(st, id)
	err = s.meta.CompareAndSetMetadata(resvImageMetaKey, s.seen, v)
	if errors.Is(err, syscall.ECANCELED) {
		return fmt.Errorf("image %s: %w", s.image, fabrics.ErrReservationChanged)
	}
	if err != nil {
		return err
	}
	s.seen = v
	return nil
}

// resvRecordVersion is the record's format; a daemon refuses one newer
// than it knows rather than misread it. Version 2 adds the image's ID;
// version 1, without it, is still read.
const resvRecordVersion = 2

// resvRecord is the stored value: compact JSON with the format's version
// and the ID of the image whose record it is.
type resvRecord struct {
	Version int    `json:"v"`
	Image   string `json:"image,omitempty"`
	resvFile
}

func encodeResvRecord(st fabrics.ReservationState, imageID string) []byte {
	b, err := json.Marshal(resvRecord{Version: resvRecordVersion, Image: imageID, resvFile: resvFileOf(st)})
	if err != nil {
		panic("encoding a reservation record: " + err.Error()) // strings and numbers only
	}
	return b
}

// decodeResvRecord reads a stored value and the ID of the image it was
// written for ("" in version 1); nil (never stored) is the zero state. A
// value that is not a consistent state of a known version is an error:
// serving on a guess could drop a host's fencing.
func decodeResvRecord(v []byte) (st fabrics.ReservationState, image string, err error) {
	if v == nil {
		return st, "", nil
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	var rec resvRecord
	if err := dec.Decode(&rec); err != nil {
		return st, "", fmt.Errorf("not a reservation record: %w", err)
	}
	if dec.More() {
		return st, "", errors.New("not a reservation record: data after it")
	}
	switch {
	case rec.Version < 1 || rec.Version > resvRecordVersion:
		return st, "", fmt.Errorf("reservation record version %d; this daemon reads versions 1 to %d", rec.Version, resvRecordVersion)
	case rec.Version == 1 && rec.Image != "":
		return st, "", errors.New("reservation record version 1 with an image ID")
	case rec.Version > 1 && rec.Image == "":
		return st, "", fmt.Errorf("reservation record version %d without its image's ID", rec.Version)
	}
	if rec.Type != nvme.ResvNone && !nvme.ValidResvType(rec.Type) {
		return st, "", fmt.Errorf("reservation record: type %d is not a reservation type", rec.Type)
	}
	st, err = rec.state()
	if err != nil {
		return st, "", fmt.Errorf("reservation record: %w", err)
	}
	for i, r := range st.Registrants {
		if registered(st.Registrants[:i], r.HostID) {
			return st, "", fmt.Errorf("reservation record: host %s registered twice", rec.Registrants[i].HostID)
		}
	}
	switch {
	case st.Type == nvme.ResvNone && rec.Holder != "":
		return st, "", fmt.Errorf("reservation record: holder %s of no reservation", rec.Holder)
	case st.Type == nvme.ResvNone:
	case nvme.ResvAllRegistrants(st.Type) && len(st.Registrants) == 0:
		return st, "", fmt.Errorf("reservation record: type %d held by every registrant, and none is", rec.Type)
	case !nvme.ResvAllRegistrants(st.Type) && !registered(st.Registrants, st.Holder):
		return st, "", fmt.Errorf("reservation record: type %d held by %q, which is not registered", rec.Type, rec.Holder)
	}
	return st, rec.Image, nil
}

func registered(regs []fabrics.Registrant, host [nvme.HostIDSize]byte) bool {
	for _, r := range regs {
		if r.HostID == host {
			return true
		}
	}
	return false
}
