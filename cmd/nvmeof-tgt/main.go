package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/ctl"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/rdma"
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

// started is when the process started, for the uptime metric.
var started = time.Now()

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
	configureLogger(log, cfg.Log)
	fabrics.Version = firmwareRevision(version)
	if err := serve(*path, cfg, log); err != nil {
		log.WithError(err).Error("nvmeof-tgt stopped")
		return 1
	}
	return 0
}

func configureLogger(log *logrus.Logger, c config.Log) {
	if c.Format == "json" {
		log.SetFormatter(&logrus.JSONFormatter{})
	} else {
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	}
	if lvl, err := logrus.ParseLevel(c.Level); err == nil {
		log.SetLevel(lvl)
	}
}

// serve runs the target until a terminating signal. SIGHUP reloads path.
// Started by systemd (Type=notify), it reports its state and, if the unit
// sets WatchdogSec=, pings the watchdog.
func serve(path string, cfg *config.Config, log *logrus.Logger) error {
	rs := rdmaSettings(cfg.RDMA)
	if err := rdma.Configure(rs); err != nil {
		return err
	}
	var inline []int
	for _, p := range cfg.Ports {
		inline = append(inline, int(p.InlineDataSize))
	}
	if err := checkMemlock(rdma.DeviceMemory(rs, inline)); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	sd, err := newNotifier(os.Getenv, monotonic, logrus.NewEntry(log))
	if err != nil {
		log.WithError(err).Warn("cannot reach systemd")
	}
	defer sd.close()
	sup := supervisor{sigs: sigs, sd: sd, clock: monotonic}
	if timeout := watchdogTimeout(os.Getenv, os.Getpid()); timeout > 0 {
		// Half the timeout, as sd_watchdog_enabled(3) advises: one late
		// ping does not get the daemon killed.
		t := time.NewTicker(timeout / 2)
		defer t.Stop()
		sup.watchdog = t.C
	}
	// Whatever the daemon may run must not speak to systemd in its name.
	for _, v := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} {
		os.Unsetenv(v)
	}
	return runDaemon(path, cfg, log, sup)
}

// supervisor is what the main loop listens and answers to: signals, the
// watchdog's ticks and systemd. Tests drive it with their own channels,
// notification socket and clock.
type supervisor struct {
	sigs     <-chan os.Signal
	watchdog <-chan time.Time // nil: no watchdog
	sd       *notifier
	clock    func() time.Duration
}

// runDaemon starts the target, tells systemd it is ready once every port
// listens, every namespace is open and the admin socket answers, then runs
// the main loop until a terminating signal.
func runDaemon(path string, cfg *config.Config, log *logrus.Logger, sup supervisor) error {
	d, err := start(cfg, log)
	if err != nil {
		return err
	}
	d.sd, d.clock = sup.sd, sup.clock
	life := openLifetime(cfg.StateFile, d.log)
	d.target.SetLifetime(life.Lifetime())
	ctl, err := api.Listen(cfg.Control.Socket, d, path, version, d.log)
	if err != nil {
		d.stop(time.Second)
		life.close()
		return err
	}
	d.log.WithFields(logrus.Fields{"version": version, "io_engine": d.target.IOEngine()}).Info("nvmeof-tgt serving")
	d.sd.readyNow(d.statusLine())
	d.mainLoop(path, sup)
	d.sd.stopping()
	// No admin change may start once hosts are being disconnected.
	ctl.Close()
	d.stop(5 * time.Second)
	life.close()
	d.log.Info("stopped")
	return nil
}

// mainLoop reloads on SIGHUP and pings the watchdog, both from this one
// goroutine: a ping proves the loop turns, the target's locks can be
// taken and no reconfiguration is stuck. It returns on SIGTERM or SIGINT.
func (d *daemon) mainLoop(path string, sup supervisor) {
	for {
		select {
		case sig := <-sup.sigs:
			if sig != syscall.SIGHUP {
				d.log.WithField("signal", sig.String()).Info("shutting down: disconnecting hosts")
				return
			}
			d.log.WithField("file", path).Info("reloading configuration")
			if err := d.Reload(path); err == nil {
				gen, _, _ := d.Generation()
				d.log.WithField("generation", gen).Info("configuration reloaded")
			}
		case <-sup.watchdog:
			status, ok := d.alive()
			if !ok {
				d.log.Errorf("a reconfiguration has held the daemon for over %s: no watchdog ping, so systemd restarts it", stuckAfter)
				continue
			}
			d.sd.setStatus(status)
			d.sd.watchdog()
		}
	}
}
