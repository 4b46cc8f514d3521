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
		fmt.Fprintln(stdout, usage())
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
