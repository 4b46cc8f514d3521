package ctl

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

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

// Run is `nvmeof-tgt ctl`. It exits 0 on success, 1 when the daemon
// refused or could not be reached, 2 on a usage error.
func Run(args []string, stdout, stderr io.Writer) int {
	sock := os.Getenv("NVMEOF_TGT_SOCKET")
	if sock == "" {
		sock = config.DefaultControlSocket
	}
	fs := flag.NewFlagSet("nvmeof-tgt ctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&sock, "socket", sock, "the daemon's admin socket `PATH` (also $NVMEOF_TGT_SOCKET)")
	err := fs.Parse(args)
	var cmd *Command
	if err == nil {
		cmd, err = Parse(fs.Args())
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
	c, err := api.Dial(sock)
	if err == nil {
		defer c.Close()
		err = cmd.Run(c, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "nvmeof-tgt ctl: %v\n", err)
		return 1
	}
	return 0
}

// Command is one parsed command: the method to call and how to show
// its result.
type Command struct {
	Method string
	Params any
	show   func(result json.RawMessage, out io.Writer) error // nil: print nothing
}

func (cmd *Command) Run(c *api.Client, out io.Writer) error {
	var result json.RawMessage
	if err := c.Call(cmd.Method, cmd.Params, &result); err != nil {
		return err
	}
	if cmd.show == nil {
		return nil
	}
	return cmd.show(result, out)
}
