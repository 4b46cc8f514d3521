package main

import (
	"log"
	"slices"
	"strconv"
	"syscall"
)

// daemonState is what the shim reads of `ctl list -json`.
type daemonState struct {
	Ports      []daemonPort      `json:"ports"`
	Subsystems []daemonSubsystem `json:"subsystems"`
}

type daemonPort struct {
	ID        uint16            `json:"id"`
	Transport string            `json:"transport"` // none from an older daemon: rdma
	Address   string            `json:"address"`
	Port      uint16            `json:"port"`
	ANA       map[string]string `json:"ana"` // the groups not optimized
}

type daemonSubsystem struct {
	NQN        string            `json:"nqn"`
	Hosts      []string          `json:"hosts"`
	Ports      []uint16          `json:"ports"` // none: every port
	Namespaces []daemonNamespace `json:"namespaces"`
}

type daemonNamespace struct {
	NSID      uint32 `json:"nsid"`
	Backend   string `json:"backend"`
	Path      string `json:"path"`
	SizeBytes uint64 `json:"size_bytes"`
	BlockSize uint32 `json:"block_size"`
	ReadOnly  bool   `json:"read_only"`
	UUID      string `json:"uuid"`
	ANAGroup  uint32 `json:"ana_group"`
}

// state asks the daemon for its running state.
func (c *cfs) state() (*daemonState, error) {
	var st daemonState
	if err := c.api.call("get_state", nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// fromState lists a directory from the daemon's running state; what
// names the directory for the log when the daemon cannot be asked.
func (c *cfs) fromState(what string, list func(st *daemonState) ([]entry, syscall.Errno)) func() ([]entry, syscall.Errno) {
	return func() ([]entry, syscall.Errno) {
		st, err := c.state()
		if err != nil {
			log.Printf("%s: %v", what, err)
			return nil, syscall.EIO
		}
		return list(st)
	}
}

func (st *daemonState) subsystem(nqn string) *daemonSubsystem {
	i := slices.IndexFunc(st.Subsystems, func(s daemonSubsystem) bool { return s.NQN == nqn })
	if i < 0 {
		return nil
	}
	return &st.Subsystems[i]
}

func (st *daemonState) port(id uint16) *daemonPort {
	i := slices.IndexFunc(st.Ports, func(p daemonPort) bool { return p.ID == id })
	if i < 0 {
		return nil
	}
	return &st.Ports[i]
}

// serves is whether subsystem s is served on port id.
func (s *daemonSubsystem) serves(id uint16) bool {
	return len(s.Ports) == 0 || slices.Contains(s.Ports, id)
}

// parseID reads a decimal configfs directory name in [lo, hi].
func parseID(name string, lo, hi uint64) (uint64, bool) {
	v, err := strconv.ParseUint(name, 10, 32)
	if err != nil || v < lo || v > hi || strconv.FormatUint(v, 10) != name {
		return 0, false
	}
	return v, true
}
