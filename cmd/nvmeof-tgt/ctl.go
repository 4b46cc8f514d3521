package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// `nvmeof-tgt ctl` is a client of the management API (rpc.go, api.go): it
// parses its command line here, calls one method and prints the result.
// ctl_verbs.go holds the commands.

const ctlUsage = `usage: nvmeof-tgt ctl [-socket PATH] COMMAND
  list [-json]                         the running state: ports, subsystems, namespaces, hosts, controllers
  add port -id N -address ADDR [-port 4420] [-inline-data-size B] [-max-queue-size N]
  add subsystem NQN [-serial S] [-model M] [-allow-any-host] [-port ID]... [-host HOSTNQN]...
  add namespace NQN -backend file|block|rbd|nullblk [-nsid N] [-path P] [-size S] [-block-size B]
                    [-read-only] [-buffered] [-uuid U] [-ana-group G]
                    [-pool P -image I [-rados-namespace N] [-create]]
  add host NQN HOSTNQN [-dhchap-key-file F | -dhchap-key -] [-dhchap-ctrl-key-file F]
                                       allow HOSTNQN into subsystem NQN, with its DH-HMAC-CHAP keys
  set host NQN HOSTNQN [-dhchap-key-file F | -dhchap-key -] [-dhchap-ctrl-key-file F]
                                       replace HOSTNQN's keys (none: no authentication)
  set subsystem NQN -allow-any-host=true|false
  set namespace NQN NSID [-size S] [-ana-group G]   resize or regroup a namespace in place
                    [-iops N] [-read-iops N] [-write-iops N] [-bandwidth R] [-read-bandwidth R]
                    [-write-bandwidth R]   or change its QoS limits (0: none), every host together
  set ana PORT GROUP STATE             ANA state of GROUP on port PORT: optimized, non_optimized,
                                       inaccessible, persistent_loss or change
  gateway release GROUP                planned handover: give up gateway group GROUP to a peer
  remove port ID | subsystem NQN | namespace NQN NSID | host NQN HOSTNQN
  save FILE|-                          write the running configuration as YAML
  reload                               re-read the configuration file, as SIGHUP does
Changes apply at once and last until the daemon stops or reloads its
file; save them to keep them. COMMAND -h lists the command's flags.
The socket is -socket PATH or -socket=PATH, else $NVMEOF_TGT_SOCKET, else
` + config.DefaultControlSocket + `.`

// runCtl is `nvmeof-tgt ctl`. It exits 0 on success, 1 when the daemon
// refused or could not be reached, 2 on a usage error.
func runCtl(args []string, stdout, stderr io.Writer) int {
	sock := os.Getenv("NVMEOF_TGT_SOCKET")
	if sock == "" {
		sock = config.DefaultControlSocket
	}
	fs := flag.NewFlagSet("nvmeof-tgt ctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&sock, "socket", sock, "the daemon's admin socket `PATH` (also $NVMEOF_TGT_SOCKET)")
	err := fs.Parse(args)
	var cmd *ctlCommand
	if err == nil {
		cmd, err = parseCtl(fs.Args())
	}
	var help *ctlHelp
	switch {
	case errors.As(err, &help):
		fmt.Fprintln(stdout, help.text)
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(stdout, ctlUsage)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "nvmeof-tgt ctl: %v\n", err)
		return 2
	}
	c, err := dialAPI(sock)
	if err == nil {
		defer c.close()
		err = cmd.run(c, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "nvmeof-tgt ctl: %v\n", err)
		return 1
	}
	return 0
}

// ctlCommand is one parsed command: the method to call and how to show
// its result.
type ctlCommand struct {
	method string
	params any
	show   func(result json.RawMessage, out io.Writer) error // nil: print nothing
}

func (cmd *ctlCommand) run(c *apiClient, out io.Writer) error {
	var result json.RawMessage
	if err := c.call(cmd.method, cmd.params, &result); err != nil {
		return err
	}
	if cmd.show == nil {
		return nil
	}
	return cmd.show(result, out)
}

// apiClient calls methods over one connection to the admin socket.
type apiClient struct {
	conn net.Conn
	dec  *json.Decoder
	id   int
}

// dialAPI connects to the daemon and does the handshake.
func dialAPI(sock string) (*apiClient, error) {
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
	c, err := newAPIClient(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// newAPIClient does the handshake on conn.
func newAPIClient(conn net.Conn) (*apiClient, error) {
	c := &apiClient{conn: conn, dec: json.NewDecoder(bufio.NewReader(conn))}
	var v versionResult
	if err := c.call("get_version", versionParams{APIVersion: apiVersion}, &v); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *apiClient) close() { c.conn.Close() }

// call sends one request and decodes its response's result into result.
// An error response comes back as an *rpcError.
func (c *apiClient) call(method string, params, result any) error {
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
		Error  *rpcError       `json:"error"`
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
