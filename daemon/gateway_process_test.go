//go:build !norbd

package daemon

import (
	"bufio"
	"fmt"
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
	image := fmt.Sprintf("gwp%d", time.Now().UnixNano())
	out, err := exec.Command("rbd", "--conf", env["CEPH_CONF"], "--id", "admin", "--keyring", env["CEPH_ADMIN_KEYRING"],
		"create", "--size", "16M", env["CEPH_POOL"]+"/"+image).CombinedOutput()
	if err != nil {
		t.Fatalf("rbd create: %v\n%s", err, out)
	}
	prefix := "test." + image
	cfgA := gatewayConfig(env, "a", env["CEPH_CONF"], image, prefix, 1)
	cfgB := gatewayConfig(env, "b", env["CEPH_CONF"], image, prefix, 101)
	holder := func() string {
		l, err := backend.OpenRadosLease(backend.RBDOptions{Pool: env["CEPH_POOL"], Conf: env["CEPH_CONF"], User: env["CEPH_USER"], Keyring: env["CEPH_KEYRING"]},
			prefix+".group.1", "reader", time.Second)
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
	blocklist := func() string {
		out, err := exec.Command("ceph", "--conf", env["CEPH_CONF"], "--id", "admin", "--keyring", env["CEPH_ADMIN_KEYRING"], "osd", "blocklist", "ls").CombinedOutput()
		if err != nil {
			t.Fatalf("osd blocklist ls: %v\n%s", err, out)
		}
		return string(out)
	}
	bare := func(addr string) string { return addr[strings.IndexByte(addr, ':')+1:] + " " }

	a := startGatewayProc(t, "a", cfgA)
	a.wait(t, optimizedLine, 15*time.Second)
	b := startGatewayProc(t, "b", cfgB)
	b.wait(t, standbyLine, 15*time.Second)
	aAddr := holder()

	// SIGSTOP of the owner: B fences A and takes over.
	a.cmd.Process.Signal(syscall.SIGSTOP)
	took := b.wait(t, optimizedLine, 3*gatewayLeaseTime)
	t.Logf("SIGSTOP of the owner: the peer optimized %v later (lease %v)", took, gatewayLeaseTime)
	if !strings.Contains(blocklist(), bare(aAddr)) {
		t.Fatalf("A's client %s not blocklisted:\n%s", aAddr, blocklist())
	}
	// SIGCONT: A finds its client blocklisted, rebuilds it and stands
	// by again by itself, inaccessible all along.
	a.cmd.Process.Signal(syscall.SIGCONT)
	a.wait(t, rebuiltLine, 10*time.Second)
	if !strings.HasPrefix(b.line(), optimizedLine) {
		t.Fatalf("b after A resumed: %q", b.line())
	}

	// kill -9 of the owner B; A restarts (a new client) and takes over,
	// fencing B.
	a.cmd.Process.Kill()
	<-a.done
	bAddr := holder()
	a2 := startGatewayProc(t, "a2", cfgA)
	a2.wait(t, standbyLine, 15*time.Second)
	b.cmd.Process.Kill()
	<-b.done
	took = a2.wait(t, optimizedLine, 3*gatewayLeaseTime)
	t.Logf("kill -9 of the owner: the restarted peer optimized %v later", took)
	if !strings.Contains(blocklist(), bare(bAddr)) {
		t.Fatalf("B's client %s not blocklisted:\n%s", bAddr, blocklist())
	}

	// B restarts and stands by; A2 stops cleanly (SIGTERM): it releases,
	// and B takes over at its next try, without fencing A2.
	b2 := startGatewayProc(t, "b2", cfgB)
	b2.wait(t, standbyLine, 15*time.Second)
	a2Addr := holder()
	a2.cmd.Process.Signal(syscall.SIGTERM)
	took = b2.wait(t, optimizedLine, gatewayLeaseTime)
	t.Logf("clean stop of the owner: the peer optimized %v later", took)
	<-a2.done
	if strings.Contains(blocklist(), bare(a2Addr)) {
		t.Fatalf("a clean release fenced %s", a2Addr)
	}

	// An operator blocklists the owner B2's client from outside: A3
	// takes the group over, and B2, without a restart, rebuilds its
	// client (a new address, not blocklisted) and stands by; with the new
	// client it takes the group back when A3 dies.
	a3 := startGatewayProc(t, "a3", cfgA)
	a3.wait(t, standbyLine, 15*time.Second)
	b2Addr := holder()
	out, err = exec.Command("ceph", "--conf", env["CEPH_CONF"], "--id", "admin", "--keyring", env["CEPH_ADMIN_KEYRING"], "osd", "blocklist", "add", b2Addr).CombinedOutput()
	if err != nil {
		t.Fatalf("osd blocklist add %s: %v\n%s", b2Addr, err, out)
	}
	added := time.Now()
	took = a3.wait(t, optimizedLine, 3*gatewayLeaseTime)
	t.Logf("blocklist of the owner's client from outside: the peer optimized %v later", took)
	b2.wait(t, rebuiltLine, 10*time.Second)
	t.Logf("the blocklisted gateway stood by again, with a new client, %v after the blocklist", time.Since(added))
	a3.cmd.Process.Kill()
	<-a3.done
	b2.wait(t, optimizedLine+" rebuilds=1", 3*gatewayLeaseTime)
	if b2New := holder(); b2New == b2Addr || strings.Contains(blocklist(), bare(b2New)) {
		t.Fatalf("B2 owns the group again with the client %s (blocklisted one %s):\n%s", b2New, b2Addr, blocklist())
	}
}
