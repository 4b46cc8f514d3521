package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/ctl"
	"github.com/nvmeof-tgt/nvmeof-tgt/daemon"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// version is stamped at build time, as the README's build command does:
//
//	go build -ldflags "-X main.version=$(git describe --tags --always --dirty)" ./cmd/nvmeof-tgt
//
// Unstamped, init takes the revision the Go toolchain recorded.
var version string

func init() { version = buildVersion(version, debug.ReadBuildInfo) }

// buildVersion is the stamped version, else the VCS revision `go build`
// records in a git checkout (12 hex digits, "-dirty" with uncommitted
// changes, as git describe prints), else the module version, else "devel".
func buildVersion(stamped string, read func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	bi, ok := read()
	if !ok {
		return "devel"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(len(s.Value), 12)]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev != "" {
		return rev + dirty
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	return "devel"
}

// firmwareRevision fits a version into Identify's 8-byte firmware
// revision, keeping what tells builds apart: the commit of a git describe
// name ("v0.2.0-5-g1a2b3c4" gives "1a2b3c4"), and "+" for a build with
// uncommitted changes, where cutting would keep a bare "-".
func firmwareRevision(v string) string {
	const size = nvme.FirmwareRevSize
	base, dirty := strings.CutSuffix(v, "-dirty")
	if len(v) <= size {
		return v
	}
	if i := strings.LastIndex(base, "-g"); i >= 0 {
		base = base[i+2:]
	}
	if dirty {
		return base[:min(len(base), size-1)] + "+"
	}
	return base[:min(len(base), size)]
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	// Before any secret is read: the configuration's, or ctl's from
	// standard input.
	if err := noCoreDumps(); err != nil {
		fmt.Fprintf(stderr, "warning: secrets may end up in core dumps: %v\n", err)
	}
	if len(args) > 0 && args[0] == "ctl" {
		return ctl.Run(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("nvmeof-tgt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "/etc/nvmeof-tgt/config.yaml", "configuration file")
	check := fs.Bool("check", false, "validate the configuration and exit")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "nvmeof-tgt %s\n", version)
		return 0
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", *path, err)
		return 1
	}
	if *check {
		for _, w := range cfg.Warnings() {
			fmt.Fprintf(stderr, "%s: warning: %s\n", *path, w)
		}
		fmt.Fprintf(stdout, "%s: configuration is valid\n", *path)
		return 0
	}
	log := logrus.New()
	log.SetOutput(stderr)
	daemon.ConfigureLogger(log, cfg.Log)
	fabrics.Version = firmwareRevision(version)
	daemon.Version = version
	control := func(d *daemon.Daemon) (func(), error) {
		cs, err := api.Listen(cfg.Control.Socket, d, *path, version, d.Log())
		if err != nil {
			return nil, err
		}
		return cs.Close, nil
	}
	if err := daemon.Serve(*path, cfg, log, control); err != nil {
		log.WithError(err).Error("nvmeof-tgt stopped")
		return 1
	}
	return 0
}
