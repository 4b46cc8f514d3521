package daemon

import (
	"fmt"
	"strings"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// configCounts is what the STATUS= line says about the running
// configuration.
type configCounts struct {
	subsystems int
	hosts      int // distinct host NQNs allowed somewhere
	anyHost    int // subsystems any host may connect to
}

func countsOf(c *config.Config) *configCounts {
	n := &configCounts{subsystems: len(c.Subsystems)}
	hosts := map[string]bool{}
	for _, s := range c.Subsystems {
		if s.AllowAnyHost {
			n.anyHost++
		}
		for _, h := range s.Hosts {
			hosts[h.NQN] = true
		}
	}
	n.hosts = len(hosts)
	return n
}

// statusLine is the one line `systemctl status` shows, for example
// "3 subsystems, 2 allowed hosts (any host on 1), 4 controllers connected".
// It reads the target's controller lists, so it blocks while the target's
// locks are held, and does not need d.mu.
func (d *Daemon) statusLine() string {
	n := d.counts.Load()
	if n == nil {
		return ""
	}
	ctrls := 0
	for _, s := range d.target.Subsystems() {
		ctrls += len(s.Controllers())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %s", plural(n.subsystems, "subsystem"), plural(n.hosts, "allowed host"))
	if n.anyHost > 0 {
		fmt.Fprintf(&b, " (any host on %d)", n.anyHost)
	}
	fmt.Fprintf(&b, ", %s connected", plural(ctrls, "controller"))
	if r := d.lastReload.Load(); r != nil && !r.ok {
		b.WriteString("; the last reload failed, see the journal")
	}
	return b.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// stuckAfter is how long one reconfiguration may hold d.mu before the
// daemon counts as wedged. Removing a namespace waits up to 10 s for its
// commands (fabrics' drain timeout); a reload removing several of them on
// hung devices can take a multiple of that, so the bound is generous.
const stuckAfter = 2 * time.Minute

// alive is the watchdog's check, run from the main loop: the target's
// locks can be taken (statusLine walks every subsystem's controllers,
// and blocks, withholding the ping, if one of them is wedged) and no
// reconfiguration has been running for longer than stuckAfter. It returns
// the status line it computed.
func (d *Daemon) alive() (string, bool) {
	status := d.statusLine()
	if began := d.applying.Load(); began != 0 && d.clock()-time.Duration(began) > stuckAfter {
		return status, false
	}
	return status, true
}
