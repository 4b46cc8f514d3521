package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// runCtl is `nvmeof-tgt ctl`: it sends its arguments to the running
// daemon's admin socket and prints the reply.
func runCtl(args []string, stdout, stderr io.Writer) int {
	sock := os.Getenv("NVMEOF_TGT_SOCKET")
	if sock == "" {
		sock = config.DefaultControlSocket
	}
	for len(args) >= 2 && (args[0] == "-socket" || args[0] == "--socket") {
		sock, args = args[1], args[2:]
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, ctlUsage)
		return 2
	}
	saveTo := ""
	if args[0] == "save" {
		if len(args) != 2 {
			fmt.Fprintln(stderr, "usage: nvmeof-tgt ctl save FILE|-")
			return 2
		}
		saveTo, args = args[1], args[:1]
	}
	rep, err := ctlCall(sock, args)
	if err != nil {
		fmt.Fprintf(stderr, "nvmeof-tgt ctl: %v\n", err)
		return 1
	}
	if saveTo != "" && saveTo != "-" && rep.Error == "" {
		if err := writeFileAtomic(saveTo, []byte(rep.Output)); err != nil {
			fmt.Fprintf(stderr, "nvmeof-tgt ctl: save: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "saved the running configuration to %s\n", saveTo)
	} else {
		io.WriteString(stdout, rep.Output)
	}
	if rep.Error != "" {
		fmt.Fprintf(stderr, "nvmeof-tgt ctl: %s\n", rep.Error)
		return 1
	}
	return 0
}

func ctlCall(sock string, args []string) (*ctlReply, error) {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("no daemon answers at %s: is nvmeof-tgt running (systemctl status nvmeof-tgt)? Use -socket for another path", sock)
		}
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("%s: permission denied: run as root", sock)
		}
		return nil, err
	}
	defer c.Close()
	// Removing a namespace waits for its in-flight commands.
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	// A refusal may arrive before the request is written: read it anyway.
	werr := json.NewEncoder(c).Encode(ctlRequest{Args: args})
	var rep ctlReply
	if err := json.NewDecoder(c).Decode(&rep); err != nil {
		if werr != nil {
			return nil, werr
		}
		return nil, fmt.Errorf("reading the daemon's reply: %w", err)
	}
	return &rep, nil
}

// writeFileAtomic replaces path with data (mode 0600), or leaves it as it
// was, also across a crash or power loss.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".nvmeof-tgt-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename itself is durable once the directory is.
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		dir.Sync()
		dir.Close()
	}
	return nil
}
