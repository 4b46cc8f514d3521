package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
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
		fmt.Fprintf(stdout, "%s: configuration is valid\n", *path)
		return 0
	}
	log := newLogger(cfg.Log, stderr)
	fabrics.Version = version
	if err := serve(cfg, log); err != nil {
		log.WithError(err).Error("nvmeof-tgt stopped")
		return 1
	}
	return 0
}

func newLogger(c config.Log, out io.Writer) *logrus.Logger {
	log := logrus.New()
	log.SetOutput(out)
	if c.Format == "json" {
		log.SetFormatter(&logrus.JSONFormatter{})
	} else {
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	}
	if lvl, err := logrus.ParseLevel(c.Level); err == nil {
		log.SetLevel(lvl)
	}
	return log
}

// serve runs the target until a terminating signal.
func serve(cfg *config.Config, log *logrus.Logger) error {
	entry := logrus.NewEntry(log)
	d, err := start(cfg, entry)
	if err != nil {
		return err
	}
	if cfg.Metrics.Address != "" {
		started := time.Now()
		c := &collector{target: d.target, started: started,
			gen: func() (uint64, bool, time.Time) { return 1, true, started }}
		if err := serveMetrics(cfg.Metrics.Address, c, entry); err != nil {
			d.stop(time.Second)
			return err
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	entry.WithField("version", version).Info("nvmeof-tgt serving")
	sig := <-sigs
	entry.WithField("signal", sig.String()).Info("shutting down: disconnecting hosts")
	d.stop(5 * time.Second)
	entry.Info("stopped")
	return nil
}

// serveMetrics listens on addr and serves /metrics in the background.
func serveMetrics(addr string, c prometheus.Collector, log *logrus.Entry) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics.address %s: %w (another process listens there, or the address is not local)", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.WithField("address", addr).Info("serving metrics")
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("metrics endpoint failed")
		}
	}()
	return nil
}

func goVersion() string { return runtime.Version() }
