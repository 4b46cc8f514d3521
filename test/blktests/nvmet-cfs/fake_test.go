package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// fakeDaemon answers the admin socket calls the shim makes from a state
// it keeps, as the daemon would, and records each call that changes
// something as "method {params}".
type fakeDaemon struct {
	mu     sync.Mutex
	st     daemonState
	calls  []string
	noResv bool // refuse the namespace key reservations, as a daemon without it
}

func startFake(t *testing.T, state string) (*fakeDaemon, string) {
	t.Helper()
	f := &fakeDaemon{}
	if err := json.Unmarshal([]byte(state), &f.st); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(conn)
		}
	}()
	return f, sock
}

// takeCalls returns the calls since the last look.
func (f *fakeDaemon) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fakeDaemon) serve(conn net.Conn) {
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
			resp["error"] = map[string]any{"code": -32700, "message": err.Error()}
		} else {
			resp["id"] = req.ID
			res, err := f.handle(req.Method, req.Params)
			if err != nil {
				resp["error"] = map[string]any{"code": -32602, "message": err.Error()}
			} else {
				resp["result"] = res
			}
		}
		b, _ := json.Marshal(resp)
		conn.Write(append(b, '\n'))
	}
}

func (f *fakeDaemon) handle(method string, raw json.RawMessage) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch method {
	case "get_version":
		return map[string]any{"api_version": 1}, nil
	case "get_state":
		return f.st, nil
	}
	f.calls = append(f.calls, method+" "+string(raw))
	var p struct {
		addParams
		Port  uint16 `json:"port"`
		Group uint32 `json:"group"`
		State string `json:"state"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	if p.Reservations && f.noResv {
		return nil, fmt.Errorf("invalid params: unknown parameter reservations")
	}
	if method == "set_ana_state" {
		port := f.st.port(p.Port)
		if port == nil {
			return nil, fmt.Errorf("no port %d", p.Port)
		}
		if port.ANA == nil {
			port.ANA = map[string]string{}
		}
		port.ANA[strconv.Itoa(int(p.Group))] = p.State
		if p.State == "optimized" {
			delete(port.ANA, strconv.Itoa(int(p.Group)))
		}
		return map[string]any{}, nil
	}
	s := f.st.subsystem(p.NQN)
	if s == nil {
		return nil, fmt.Errorf("no subsystem %s", p.NQN)
	}
	i := slices.IndexFunc(s.Namespaces, func(n daemonNamespace) bool { return n.NSID == p.NSID })
	switch {
	case method == "add_namespace" && i >= 0:
		return nil, fmt.Errorf("namespace %d already exists in %s", p.NSID, p.NQN)
	case method == "add_namespace":
		s.Namespaces = append(s.Namespaces, daemonNamespace{NSID: p.NSID, Backend: p.Backend, Path: p.Path,
			SizeBytes: 1 << 20, BlockSize: 512, UUID: p.UUID, ANAGroup: max(p.ANAGroup, 1)})
	case i < 0:
		return nil, fmt.Errorf("no namespace %d in %s", p.NSID, p.NQN)
	case method == "remove_namespace":
		s.Namespaces = slices.Delete(s.Namespaces, i, i+1)
	case method == "set_namespace":
		s.Namespaces[i].ANAGroup = p.ANAGroup
	default:
		return nil, fmt.Errorf("method %s not found", method)
	}
	return map[string]any{}, nil
}
