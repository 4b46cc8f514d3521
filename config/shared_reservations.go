package config

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// SharedReservations keeps a block namespace's reservation on the device
// itself, in its last 1 MiB, for two daemons that serve the device
// together: each enforces what the other stored. Slot tells the two
// apart, 0 on one daemon and 1 on the other. The namespace is the device
// less that 1 MiB.
type SharedReservations struct {
	On   bool `yaml:"-"` // the key is in the configuration
	Slot int  `yaml:"slot"`
}

// SharedReservationsArea is the size of the reservation area at the end of
// the device, which the namespace gives up.
const SharedReservationsArea = 1 << 20

var sharedReservationsKeys = []string{"slot"}

// UnmarshalYAML takes {slot: 0} or {slot: 1}; a missing slot reads as -1,
// which validation refuses.
func (s *SharedReservations) UnmarshalYAML(n *yaml.Node) error {
	if err := checkKeys(n, "shared_reservations", sharedReservationsKeys); err != nil {
		return err
	}
	var f struct {
		Slot *int `yaml:"slot"`
	}
	if err := n.Decode(&f); err != nil {
		return fmt.Errorf("line %d: shared_reservations: want {slot: 0} or {slot: 1}", n.Line)
	}
	*s = SharedReservations{On: true, Slot: -1}
	if f.Slot != nil {
		s.Slot = *f.Slot
	}
	return nil
}

// MarshalYAML writes {slot: N}.
func (s SharedReservations) MarshalYAML() (any, error) {
	return struct {
		Slot int `yaml:"slot"`
	}{s.Slot}, nil
}

// IsZero leaves the key out when it is off.
func (s SharedReservations) IsZero() bool { return !s.On }

// validate checks the key of namespace ns at path.
func (s SharedReservations) validate(v *validator, path string, ns Namespace) {
	if !s.On {
		return
	}
	path += ".shared_reservations"
	switch {
	case ns.Backend != "block":
		v.add(path, "only for the block backend (the reservation lives in the device's last 1 MiB)")
	case s.Slot != 0 && s.Slot != 1:
		v.add(path+".slot", "%d: want 0 on one daemon and 1 on the other", s.Slot)
	case !ns.Reservations.On():
		v.add(path, "needs reservations on (remove reservations: false)")
	}
}
