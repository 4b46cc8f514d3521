package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// Client calls methods over one connection to the admin socket.
type Client struct {
	conn net.Conn
	dec  *json.Decoder
	id   int
}

// Dial connects to the daemon and does the handshake.
func Dial(sock string) (*Client, error) {
	conn, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("no daemon answers at %s: is nvmeof-tgt running (systemctl status nvmeof-tgt)? Use -socket for another path", sock)
		}
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("%s: permission denied: run as root", sock)
		}
		return nil, err
	}
	// Removing a namespace waits for its in-flight commands, and a reload
	// may drain several: give the daemon well past its own two-minute
	// bound on a stuck change (the watchdog's), so a slow change that does
	// complete is not reported as failed.
	conn.SetDeadline(time.Now().Add(10 * time.Minute))
	c, err := NewClient(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// NewClient does the handshake on conn.
func NewClient(conn net.Conn) (*Client, error) {
	c := &Client{conn: conn, dec: json.NewDecoder(bufio.NewReader(conn))}
	var v VersionResult
	if err := c.Call("get_version", VersionParams{APIVersion: APIVersion}, &v); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Client) Close() { c.conn.Close() }

// Call sends one request and decodes its response's result into result.
// An error response comes back as an *rpcError.
func (c *Client) Call(method string, params, result any) error {
	c.id++
	req, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int    `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", c.id, method, params})
	if err != nil {
		return err
	}
	// A refusal may arrive before the request is written: read it anyway.
	_, werr := c.conn.Write(append(req, '\n'))
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := c.dec.Decode(&resp); err != nil {
		if werr != nil {
			return werr
		}
		return fmt.Errorf("reading the daemon's reply: %w", err)
	}
	if resp.Error != nil {
		return resp.Error
	}
	return json.Unmarshal(resp.Result, result)
}
