package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"
)

// The namespace, ANA and state calls go to the daemon's admin socket
// (JSON-RPC, one request a line) over one connection, not through
// `nvmeof-tgt ctl`: nvme/051 alone makes 800 writes, and each ctl start
// loads the daemon's libraries, which takes seconds under emulation.

const defaultSocket = "/run/nvmeof-tgt/ctl.sock"

// reconnectAfter is shorter than the daemon's idle timeout (2 min): a
// connection idle longer is dialled again before use, so a request is
// never sent on one the daemon is closing.
const reconnectAfter = time.Minute

type apiClient struct {
	sock string

	conn     net.Conn
	rd       *bufio.Reader
	id       int
	lastUsed time.Time
}

// apiError is the daemon's refusal: its message names the field.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

func socketPath() string {
	if s := os.Getenv("NVMEOF_TGT_SOCKET"); s != "" {
		return s
	}
	return defaultSocket
}

func (a *apiClient) dial() error {
	conn, err := net.DialTimeout("unix", a.sock, 5*time.Second)
	if err != nil {
		return fmt.Errorf("the daemon's admin socket: %v", err)
	}
	a.conn, a.rd, a.lastUsed = conn, bufio.NewReader(conn), time.Now()
	if err := a.send("get_version", map[string]int{"api_version": 1}, nil); err != nil {
		a.close()
		return err
	}
	return nil
}

func (a *apiClient) close() {
	if a.conn != nil {
		a.conn.Close()
		a.conn = nil
	}
}

// call runs method with params and decodes the result into result (nil:
// ignored). Calls are not concurrent: cfs.mu orders them.
func (a *apiClient) call(method string, params, result any) error {
	if a.conn != nil && time.Since(a.lastUsed) > reconnectAfter {
		a.close()
	}
	if a.conn == nil {
		if err := a.dial(); err != nil {
			return err
		}
	}
	err := a.send(method, params, result)
	if _, refused := err.(*apiError); err != nil && !refused {
		a.close() // the connection is in an unknown state
	}
	return err
}

func (a *apiClient) send(method string, params, result any) error {
	a.id++
	req, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int    `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", a.id, method, params})
	if err != nil {
		return err
	}
	a.conn.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := a.conn.Write(append(req, '\n')); err != nil {
		return fmt.Errorf("%s: %v", method, err)
	}
	line, err := a.rd.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("%s: reading the daemon's reply: %v", method, err)
	}
	a.lastUsed = time.Now()
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *apiError       `json:"error"`
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		return fmt.Errorf("%s: %v", method, err)
	}
	if resp.Error != nil {
		return resp.Error
	}
	if result == nil {
		return nil
	}
	return json.Unmarshal(resp.Result, result)
}
