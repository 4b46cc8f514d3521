package daemon

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/sirupsen/logrus"
)

// logTime stamps log lines to the millisecond: a failover's steps, across
// daemons, come within the same second.
const logTime = "2006-01-02T15:04:05.000Z07:00"

func ConfigureLogger(log *logrus.Logger, c config.Log) {
	if c.Format == "json" {
		log.SetFormatter(&logrus.JSONFormatter{TimestampFormat: logTime})
	} else {
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: logTime})
	}
	if lvl, err := logrus.ParseLevel(c.Level); err == nil {
		log.SetLevel(lvl)
	}
}

// Serve runs the target until a terminating signal. SIGHUP reloads path.
// Started by systemd (Type=notify), it reports its state and, if the unit
// sets WatchdogSec=, pings the watchdog.
func Serve(path string, cfg *config.Config, log *logrus.Logger, control Control) error {
	if err := configureRDMA(cfg); err != nil {
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
	return Run(path, cfg, log, sup, control)
}

// Control opens the admin socket on the started daemon d, which answers
// once it returns, and returns what closes it. The daemon's command
// passes the management API's (api.Listen): the API drives the daemon,
// never the other way.
type Control func(d *Daemon) (close func(), err error)

// supervisor is what the main loop listens and answers to: signals, the
// watchdog's ticks and systemd. Tests drive it with their own channels,
// notification socket and clock.
type supervisor struct {
	sigs     <-chan os.Signal
	watchdog <-chan time.Time // nil: no watchdog
	sd       *notifier
	clock    func() time.Duration
}

// Run starts the target, tells systemd it is ready once every port
// listens, every namespace is open and the admin socket answers, then runs
// the main loop until a terminating signal.
func Run(path string, cfg *config.Config, log *logrus.Logger, sup supervisor, control Control) error {
	d, err := Start(cfg, log)
	if err != nil {
		return err
	}
	d.sd, d.clock = sup.sd, sup.clock
	life := openLifetime(cfg.StateFile, d.log)
	d.target.SetLifetime(life.Lifetime())
	closeControl, err := control(d)
	if err != nil {
		d.Stop(time.Second)
		life.close()
		return err
	}
	d.log.WithFields(logrus.Fields{"version": Version, "io_engine": d.target.IOEngine()}).Info("nvmeof-tgt serving")
	d.sd.readyNow(d.statusLine())
	d.mainLoop(path, sup)
	d.sd.stopping()
	// No admin change may start once hosts are being disconnected.
	closeControl()
	d.Stop(5 * time.Second)
	life.close()
	d.log.Info("stopped")
	return nil
}

// mainLoop reloads on SIGHUP and pings the watchdog, both from this one
// goroutine: a ping proves the loop turns, the target's locks can be
// taken and no reconfiguration is stuck. It returns on SIGTERM or SIGINT.
func (d *Daemon) mainLoop(path string, sup supervisor) {
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
