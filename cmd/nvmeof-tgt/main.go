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

// started is when the process started, for the uptime metric.
var started = time.Now()

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "ctl" {
		return runCtl(args[1:], stdout, stderr)
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
		fmt.Fprintf(stdout, "%s: configuration is valid\n", *path)
		return 0
	}
	log := logrus.New()
	log.SetOutput(stderr)
	configureLogger(log, cfg.Log)
	fabrics.Version = version
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
func serve(path string, cfg *config.Config, log *logrus.Logger) error {
	if err := checkMemlock(); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	d, err := start(cfg, log)
	if err != nil {
		return err
	}
	life := openLifetime(cfg.StateFile, d.log)
	d.target.SetLifetime(life.Lifetime())
	ctl, err := serveControl(cfg.Control.Socket, d, path)
	if err != nil {
		d.stop(time.Second)
		life.close()
		return err
	}
	entry := d.log
	entry.WithField("version", version).Info("nvmeof-tgt serving")
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			entry.WithField("file", path).Info("reloading configuration")
			if err := d.reload(path); err == nil {
				gen, _, _ := d.generation()
				entry.WithField("generation", gen).Info("configuration reloaded")
			}
			continue
		}
		entry.WithField("signal", sig.String()).Info("shutting down: disconnecting hosts")
		break
	}
	// No admin change may start once hosts are being disconnected.
	ctl.close()
	d.stop(5 * time.Second)
	life.close()
	entry.Info("stopped")
	return nil
}

// metricsServer serves /metrics until closed.
type metricsServer struct{ srv *http.Server }

func (m *metricsServer) close() { m.srv.Close() }

// serveMetrics listens on addr and serves /metrics in the background.
func serveMetrics(addr string, c prometheus.Collector, log *logrus.Entry) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.address %s: %w (another process listens there, or the address is not local)", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.WithField("address", addr).Info("serving metrics")
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("metrics endpoint failed")
		}
	}()
	return &metricsServer{srv}, nil
}

func goVersion() string { return runtime.Version() }
