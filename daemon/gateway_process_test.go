//go:build !norbd

package daemon

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	cephtest "github.com/nvmeof-tgt/nvmeof-tgt/test/ceph"
)

// The gateway pair as separate processes on this machine, against the
// real cluster: kill -9 and SIGSTOP need a process of their own, with a
// RADOS client of its own. The test binary plays a daemon without RDMA
// (gatewayChild): it starts from a configuration file and prints the
// lease state and the port's ANA state of group 1, and the rebuilds of
// its client, every 50 ms.

// gwProc is a child daemon and the last line it printed.
type gwProc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	last string
	done chan struct{}
}

func startGatewayProc(t *testing.T, name, cfgText string) *gwProc {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &gwProc{name: name, cmd: exec.Command(exe), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), gatewayChildEnv+"="+path)
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = logf
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.last = sc.Text()
			p.mu.Unlock()
		}
		p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s's log:\n%s", name, b)
		}
	})
	return p
}

func (p *gwProc) line() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// wait polls p's output until it starts with want, for at most limit.
func (p *gwProc) wait(t *testing.T, want string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for !strings.HasPrefix(p.line(), want) {
		select {
		case <-p.done:
			t.Fatalf("%s exited, last line %q, waiting for %q", p.name, p.line(), want)
		default:
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: %q after %v, want %q", p.name, p.line(), limit, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the child's report
	}
	return time.Since(start)
}

const (
	optimizedLine    = "state=owner ana=optimized"
	standbyLine      = "state=standby ana=inaccessible"
	rebuiltLine      = "state=standby ana=inaccessible rebuilds=1"
	gatewayLeaseTime = 3 * time.Second // gatewayConfig's lease_seconds
)

func TestGatewayProcesses(t *testing.T) {
	env := cephtest.Use(t)
	image := cephtest.CreateImage(t, env, "gwp")
	prefix := "test." + image
	c := &procCluster{env: env, prefix: prefix,
		cfgA: gatewayConfig(env, "a", env["CEPH_CONF"], image, prefix, 1),
		cfgB: gatewayConfig(env, "b", env["CEPH_CONF"], image, prefix, 101)}

	a := startGatewayProc(t, "a", c.cfgA)
	a.wait(t, optimizedLine, 15*time.Second)
	b := startGatewayProc(t, "b", c.cfgB)
	b.wait(t, standbyLine, 15*time.Second)
	c.suspendOwner(t, a, b)
	a2 := c.killOwner(t, a, b)
	b2 := c.stopOwner(t, a2)
	c.blocklistOwner(t, b2)
}

// procCluster is what TestGatewayProcesses's daemons share: the cluster,
// their lease prefix and configurations.
type procCluster struct {
	env        map[string]string
	prefix     string
	cfgA, cfgB string
}

// holder is the client address in group 1's lease record.
func (c *procCluster) holder(t *testing.T) string {
	t.Helper()
	l, err := backend.OpenRadosLease(backend.RBDOptions{Pool: c.env["CEPH_POOL"], Conf: c.env["CEPH_CONF"], User: c.env["CEPH_USER"], Keyring: c.env["CEPH_KEYRING"]},
		c.prefix+".group.1", "reader", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h, err := l.Holder()
	if err != nil {
		t.Fatal(err)
	}
	// name, cookie, client address, handover
	f := strings.Split(h, "\n")
	if len(f) < 3 {
		t.Fatalf("lease record %q", h)
	}
	return f[2]
}

// ceph runs the ceph command as the cluster's admin and returns its
// output.
func (c *procCluster) ceph(t *testing.T, args ...string) string {
	t.Helper()
	admin := []string{"--conf", c.env["CEPH_CONF"], "--id", "admin", "--keyring", c.env["CEPH_ADMIN_KEYRING"]}
	out, err := exec.Command("ceph", append(admin, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (c *procCluster) blocklist(t *testing.T) string { return c.ceph(t, "osd", "blocklist", "ls") }

// bare is the part of a client address that osd blocklist ls shows,
// from after its first colon, with the space that follows it there.
func bare(addr string) string { return addr[strings.IndexByte(addr, ':')+1:] + " " }

// suspendOwner stops the owner a with SIGSTOP: b fences a and takes over.
// On SIGCONT, a finds its client blocklisted, rebuilds it and stands by
// again by itself, inaccessible all along.
func (c *procCluster) suspendOwner(t *testing.T, a, b *gwProc) {
	aAddr := c.holder(t)
	a.cmd.Process.Signal(syscall.SIGSTOP)
	took := b.wait(t, optimizedLine, 3*gatewayLeaseTime)
	t.Logf("SIGSTOP of the owner: the peer optimized %v later (lease %v)", took, gatewayLeaseTime)
	if !strings.Contains(c.blocklist(t), bare(aAddr)) {
		t.Fatalf("A's client %s not blocklisted:\n%s", aAddr, c.blocklist(t))
	}
	a.cmd.Process.Signal(syscall.SIGCONT)
	a.wait(t, rebuiltLine, 10*time.Second)
	if !strings.HasPrefix(b.line(), optimizedLine) {
		t.Fatalf("b after A resumed: %q", b.line())
	}
}

// killOwner kills a (kill -9) and restarts it as a2 (a new client), then
// kills the owner b: a2 takes over, fencing b. It returns a2.
func (c *procCluster) killOwner(t *testing.T, a, b *gwProc) *gwProc {
	a.cmd.Process.Kill()
	<-a.done
	bAddr := c.holder(t)
	a2 := startGatewayProc(t, "a2", c.cfgA)
	a2.wait(t, standbyLine, 15*time.Second)
	b.cmd.Process.Kill()
	<-b.done
	took := a2.wait(t, optimizedLine, 3*gatewayLeaseTime)
	t.Logf("kill -9 of the owner: the restarted peer optimized %v later", took)
	if !strings.Contains(c.blocklist(t), bare(bAddr)) {
		t.Fatalf("B's client %s not blocklisted:\n%s", bAddr, c.blocklist(t))
	}
	return a2
}

// stopOwner restarts b as b2, which stands by, and stops the owner a2
// cleanly (SIGTERM): a2 releases, and b2 takes over at its next try,
// without fencing a2. It returns b2.
func (c *procCluster) stopOwner(t *testing.T, a2 *gwProc) *gwProc {
	b2 := startGatewayProc(t, "b2", c.cfgB)
	b2.wait(t, standbyLine, 15*time.Second)
	a2Addr := c.holder(t)
	a2.cmd.Process.Signal(syscall.SIGTERM)
	took := b2.wait(t, optimizedLine, gatewayLeaseTime)
	t.Logf("clean stop of the owner: the peer optimized %v later", took)
	<-a2.done
	if strings.Contains(c.blocklist(t), bare(a2Addr)) {
		t.Fatalf("a clean release fenced %s", a2Addr)
	}
	return b2
}

// blocklistOwner has an operator blocklist the owner b2's client from
// outside: a3 takes the group over, and b2, without a restart, rebuilds
// its client (a new address, not blocklisted) and stands by; with the new
// client it takes the group back when a3 dies.
func (c *procCluster) blocklistOwner(t *testing.T, b2 *gwProc) {
	a3 := startGatewayProc(t, "a3", c.cfgA)
	a3.wait(t, standbyLine, 15*time.Second)
	b2Addr := c.holder(t)
	c.ceph(t, "osd", "blocklist", "add", b2Addr)
	added := time.Now()
	took := a3.wait(t, optimizedLine, 3*gatewayLeaseTime)
	t.Logf("blocklist of the owner's client from outside: the peer optimized %v later", took)
	b2.wait(t, rebuiltLine, 10*time.Second)
	t.Logf("the blocklisted gateway stood by again, with a new client, %v after the blocklist", time.Since(added))
	a3.cmd.Process.Kill()
	<-a3.done
	b2.wait(t, optimizedLine+" rebuilds=1", 3*gatewayLeaseTime)
	if b2New := c.holder(t); b2New == b2Addr || strings.Contains(c.blocklist(t), bare(b2New)) {
		t.Fatalf("B2 owns the group again with the client %s (blocklisted one %s):\n%s", b2New, b2Addr, c.blocklist(t))
	}
}
