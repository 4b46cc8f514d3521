// Package fakedaemon answers the admin socket calls nvmet-cfs makes
// (get_state, add_namespace, remove_namespace, set_namespace,
// set_ana_state) as nvmeof-tgt would, from a state file in get_state's
// JSON form (api.State). It reads the file on every call and writes each
// change back, so a stub of `nvmeof-tgt ctl` may edit the same file between calls; it
// appends each change call to a log file as "METHOD {params}". It is for
// the shim's tests (cfs's Go tests and selftest.sh), not a daemon.
package fakedaemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
)

// params is every parameter of the calls it answers.
type params struct {
	NQN          string `json:"nqn"`
	NSID         uint32 `json:"nsid"`
	Backend      string `json:"backend"`
	Path         string `json:"path"`
	Size         uint64 `json:"size"`
	BlockSize    uint32 `json:"block_size"`
	ReadOnly     bool   `json:"read_only"`
	UUID         string `json:"uuid"`
	ANAGroup     uint32 `json:"ana_group"`
	Reservations bool   `json:"reservations"`
	Port         uint16 `json:"port"`
	Group        uint32 `json:"group"`
	State        string `json:"state"`
	APIVersion   int    `json:"api_version"`
}

// Daemon serves the socket until Close.
type Daemon struct {
	StatePath, LogPath string

	mu     sync.Mutex
	noResv bool
	l      net.Listener
}

// Listen serves sock from the state file at statePath.
func Listen(sock, statePath, logPath string) (*Daemon, error) {
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	d := &Daemon{StatePath: statePath, LogPath: logPath, l: l}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go d.serve(conn)
		}
	}()
	return d, nil
}

func (d *Daemon) Close() error { return d.l.Close() }

// RefuseReservations makes add_namespace refuse the key reservations, as
// a daemon without it does.
func (d *Daemon) RefuseReservations(refuse bool) {
	d.mu.Lock()
	d.noResv = refuse
	d.mu.Unlock()
}

func (d *Daemon) serve(conn net.Conn) {
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		var req struct {
			ID     int             `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		resp := map[string]any{"jsonrpc": "2.0"}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp["error"] = &api.Error{Code: api.CodeParseError, Message: err.Error()}
		} else {
			resp["id"] = req.ID
			if res, err := d.handle(req.Method, req.Params); err != nil {
				resp["error"] = &api.Error{Code: api.CodeInvalidParams, Message: err.Error()}
			} else {
				resp["result"] = res
			}
		}
		b, _ := json.Marshal(resp)
		if _, err := conn.Write(append(b, '\n')); err != nil {
			return
		}
	}
}

func (d *Daemon) handle(method string, raw json.RawMessage) (any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var st api.State
	b, err := os.ReadFile(d.StatePath)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		return nil, fmt.Errorf("state: %v", err)
	}
	var p params
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
	}
	switch method {
	case "get_version":
		return api.VersionResult{APIVersion: api.APIVersion}, nil
	case "get_state":
		return st, nil
	}
	if err := d.log(method + " " + string(raw)); err != nil {
		return nil, err
	}
	if err := change(&st, method, p, d.noResv); err != nil {
		return nil, err
	}
	st.Generation++
	b, _ = json.Marshal(st)
	return map[string]any{}, os.WriteFile(d.StatePath, b, 0o644)
}

func (d *Daemon) log(line string) error {
	f, err := os.OpenFile(d.LogPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	return errors.Join(err, f.Close())
}

func change(st *api.State, method string, p params, noResv bool) error {
	if p.Reservations && noResv {
		return fmt.Errorf("invalid params: unknown parameter reservations")
	}
	if method == "set_ana_state" {
		i := slices.IndexFunc(st.Ports, func(q api.PortState) bool { return q.ID == p.Port })
		if i < 0 {
			return fmt.Errorf("no port %d", p.Port)
		}
		q := &st.Ports[i]
		if q.ANA == nil {
			q.ANA = map[uint32]string{}
		}
		q.ANA[p.Group] = p.State
		if p.State == "optimized" {
			delete(q.ANA, p.Group)
		}
		return nil
	}
	i := slices.IndexFunc(st.Subsystems, func(s api.SubState) bool { return s.NQN == p.NQN })
	if i < 0 {
		return fmt.Errorf("no subsystem %s", p.NQN)
	}
	s := &st.Subsystems[i]
	j := slices.IndexFunc(s.Namespaces, func(n api.NSState) bool { return n.NSID == p.NSID })
	switch {
	case method == "add_namespace" && j >= 0:
		return fmt.Errorf("namespace %d already exists in %s", p.NSID, p.NQN)
	case method == "add_namespace":
		s.Namespaces = append(s.Namespaces, api.NSState{NSID: p.NSID, Backend: p.Backend, Path: p.Path,
			SizeBytes: 1 << 20, BlockSize: 512, UUID: p.UUID, ANAGroup: max(p.ANAGroup, 1)})
	case j < 0:
		return fmt.Errorf("no namespace %d in %s", p.NSID, p.NQN)
	case method == "remove_namespace":
		s.Namespaces = slices.Delete(s.Namespaces, j, j+1)
	case method == "set_namespace":
		s.Namespaces[j].ANAGroup = p.ANAGroup
	default:
		return fmt.Errorf("method %s not found", method)
	}
	return nil
}
