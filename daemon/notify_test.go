package daemon

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/ctl"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// fakeSystemd is the receiving end of NOTIFY_SOCKET.
type fakeSystemd struct {
	conn *net.UnixConn
	addr string
}

func listenNotify(t *testing.T, addr string) *fakeSystemd {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &fakeSystemd{conn, addr}
}

// expect reads the next message and fails unless it is want. The deadline
// only bounds a hang; the order of messages is fixed by the daemon.
func (f *fakeSystemd) expect(t *testing.T, want string) {
	t.Helper()
	buf := make([]byte, 4096)
	f.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := f.conn.Read(buf)
	if err != nil {
		t.Fatalf("waiting for %q: %v", want, err)
	}
	if got := string(buf[:n]); got != want {
		t.Fatalf("systemd got %q, want %q", got, want)
	}
}

// notifier connects a notifier to f as systemd's environment would.
func (f *fakeSystemd) notifier(t *testing.T, clock func() time.Duration) *notifier {
	t.Helper()
	n, err := newNotifier(envOf(map[string]string{"NOTIFY_SOCKET": f.addr}), clock, logrus.NewEntry(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.close)
	return n
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// fakeClock is CLOCK_MONOTONIC under the test's control.
type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) read() time.Duration      { return time.Duration(c.now.Load()) }
func (c *fakeClock) advance(by time.Duration) { c.now.Add(int64(by)) }

// notifiedDaemon runs the daemon's main loop over the fake transport,
// under a fake systemd, from the configuration file it returns.
type notifiedDaemon struct {
	systemd *fakeSystemd
	clock   *fakeClock
	sigs    chan os.Signal
	tick    chan time.Time
	done    chan error
	dir     string
	config  string
}

func runNotified(t *testing.T) *notifiedDaemon {
	t.Helper()
	useFakeRDMA(t)
	dir := t.TempDir()
	nd := &notifiedDaemon{
		systemd: listenNotify(t, filepath.Join(dir, "notify")), clock: &fakeClock{},
		sigs: make(chan os.Signal), tick: make(chan time.Time), done: make(chan error, 1),
		dir: dir, config: filepath.Join(dir, "config.yaml"),
	}
	nd.clock.advance(time.Hour)
	nd.write(t, "")
	cfg, err := config.Load(nd.config)
	if err != nil {
		t.Fatal(err)
	}
	sup := supervisor{sigs: nd.sigs, watchdog: nd.tick, sd: nd.systemd.notifier(t, nd.clock.read), clock: nd.clock.read}
	go func() { nd.done <- Run(nd.config, cfg, quietLogger(), sup, apiControl(cfg, nd.config)) }()
	return nd
}

// write replaces the configuration file: baseConfig with extra subsystems.
func (nd *notifiedDaemon) write(t *testing.T, extra string) {
	t.Helper()
	y := fmt.Sprintf("state_file: %s/state.json\n%s", nd.dir, baseConfig(nd.dir, extra))
	if err := os.WriteFile(nd.config, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (nd *notifiedDaemon) ctl(args ...string) (int, string) {
	var out strings.Builder
	code := ctl.Run(append([]string{"-socket", nd.dir + "/ctl.sock"}, args...), &out, &out)
	return code, out.String()
}

// stop sends SIGTERM: systemd hears STOPPING=1 and the daemon ends cleanly.
func (nd *notifiedDaemon) stop(t *testing.T) {
	t.Helper()
	nd.sigs <- syscall.SIGTERM
	nd.systemd.expect(t, "STOPPING=1")
	if err := <-nd.done; err != nil {
		t.Fatalf("daemon ended with %v", err)
	}
}

const subsystemC = `  - nqn: nqn.2026-11.io.example:c
    hosts: [nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000c]
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]
`

// The whole conversation with systemd, in order: ready, a reload by
// SIGHUP, a rejected reload by the admin socket (`systemctl reload` runs
// `ctl reload`, which must then fail), a watchdog ping, the shutdown.
func TestNotifySequence(t *testing.T) {
	nd := runNotified(t)
	sd := nd.systemd
	sd.expect(t, "READY=1\nSTATUS=2 subsystems, 0 allowed hosts (any host on 2), 0 controllers connected")

	nd.write(t, subsystemC)
	nd.sigs <- syscall.SIGHUP
	sd.expect(t, "RELOADING=1\nMONOTONIC_USEC=3600000000")
	sd.expect(t, "STATUS=3 subsystems, 1 allowed host (any host on 2), 0 controllers connected")
	sd.expect(t, "READY=1")

	os.WriteFile(nd.config, []byte("ports: [{id: 1, address: 10.0.0.1}]\nsubsystems: [{nqn: x, namespaces: [{nsid: 0}]}]\n"), 0o600)
	nd.clock.advance(1500 * time.Microsecond)
	if code, out := nd.ctl("reload"); code != 1 || !strings.Contains(out, "subsystems[0]") {
		t.Fatalf("ctl reload of a broken file: exit %d, want 1:\n%s", code, out)
	}
	sd.expect(t, "RELOADING=1\nMONOTONIC_USEC=3600001500")
	sd.expect(t, "READY=1\nSTATUS=3 subsystems, 1 allowed host (any host on 2), 0 controllers connected; the last reload failed, see the journal")

	nd.tick <- time.Time{}
	sd.expect(t, "WATCHDOG=1")

	// An admin change updates the status line without a reload.
	if code, out := nd.ctl("add", "host", nqnA, "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000aa"); code != 0 {
		t.Fatalf("ctl add host: exit %d\n%s", code, out)
	}
	sd.expect(t, "STATUS=3 subsystems, 2 allowed hosts (any host on 2), 0 controllers connected; the last reload failed, see the journal")
	nd.stop(t)
}

// A reconfiguration stuck past stuckAfter withholds the watchdog ping, so
// systemd restarts the daemon; one that has just begun does not.
func TestWatchdogWithheldWhileStuck(t *testing.T) {
	nd := runNotified(t)
	sd := nd.systemd
	sd.expect(t, "READY=1\nSTATUS=2 subsystems, 0 allowed hosts (any host on 2), 0 controllers connected")

	// Adding port 9 blocks in listen, holding the daemon's lock.
	entered, release := make(chan struct{}), make(chan struct{})
	inner := listen
	listen = func(tg *fabrics.Target, p *fabrics.Port, log *logrus.Entry) (portListener, error) {
		if p.ID == 9 {
			close(entered)
			<-release
		}
		return inner(tg, p, log)
	}
	added := make(chan int, 1)
	go func() {
		code, _ := nd.ctl("add", "port", "-id", "9", "-address", "10.0.0.9")
		added <- code
	}()
	<-entered
	nd.tick <- time.Time{}
	sd.expect(t, "WATCHDOG=1") // just begun: still alive

	nd.clock.advance(stuckAfter + time.Second)
	nd.tick <- time.Time{}
	// The reload waits for the stuck change; RELOADING=1 comes first, so
	// the message after the tick shows no ping was sent for it.
	nd.sigs <- syscall.SIGHUP
	sd.expect(t, fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", (time.Hour+stuckAfter+time.Second).Microseconds()))
	close(release)
	if code := <-added; code != 0 {
		t.Fatalf("ctl add port: exit %d", code)
	}
	sd.expect(t, "READY=1")
	nd.tick <- time.Time{}
	sd.expect(t, "WATCHDOG=1")
	nd.stop(t)
}

func TestNotifierEnvironment(t *testing.T) {
	// Outside systemd nothing is sent and nothing fails.
	n, err := newNotifier(envOf(nil), monotonic, nil)
	if err != nil || n.conn != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v, conn %v", err, n.conn)
	}
	n.readyNow("x")
	n.watchdog()

	if _, err := newNotifier(envOf(map[string]string{"NOTIFY_SOCKET": "relative/path"}), monotonic, nil); err == nil {
		t.Fatal("a relative NOTIFY_SOCKET was accepted")
	}
	if _, err := newNotifier(envOf(map[string]string{"NOTIFY_SOCKET": filepath.Join(t.TempDir(), "none")}), monotonic, nil); err == nil {
		t.Fatal("a NOTIFY_SOCKET nobody listens on was accepted")
	}

	// An abstract socket, as systemd uses for some services.
	abstract := fmt.Sprintf("@nvmeof-tgt-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	sd := listenNotify(t, abstract)
	sd.notifier(t, monotonic).stopping()
	sd.expect(t, "STOPPING=1")
}

var watchdogEnvs = []struct {
	env  map[string]string
	want time.Duration
}{
	{nil, 0},
	{map[string]string{"WATCHDOG_USEC": "30000000"}, 30 * time.Second},
	{map[string]string{"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "4242"}, 30 * time.Second},
	{map[string]string{"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, 0}, // another process's
	{map[string]string{"WATCHDOG_USEC": "0"}, 0},
	{map[string]string{"WATCHDOG_USEC": "thirty"}, 0},
}

func TestWatchdogTimeout(t *testing.T) {
	for _, tc := range watchdogEnvs {
		if got := watchdogTimeout(envOf(tc.env), 4242); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.env, got, tc.want)
		}
	}
}

// A send that fails is logged once; the daemon carries on.
func TestNotifierSendFailure(t *testing.T) {
	sd := listenNotify(t, filepath.Join(t.TempDir(), "notify"))
	log := quietLogger()
	var lines strings.Builder
	log.SetOutput(&lines)
	n, err := newNotifier(envOf(map[string]string{"NOTIFY_SOCKET": sd.addr}), monotonic, logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	sd.conn.Close()
	n.watchdog()
	n.watchdog()
	if c := strings.Count(lines.String(), "cannot notify systemd"); c != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", c, lines.String())
	}
}

// Once STOPPING=1 is out, a reload still finishing on the admin socket
// does not announce RELOADING=1 or READY=1: systemd would take the unit
// as running again.
func TestNothingAfterStopping(t *testing.T) {
	sd := listenNotify(t, filepath.Join(t.TempDir(), "notify"))
	n := sd.notifier(t, func() time.Duration { return time.Hour })
	n.readyNow("")
	sd.expect(t, "READY=1")
	n.stopping()
	sd.expect(t, "STOPPING=1")
	n.reloading()
	n.readyNow("1 subsystem")
	n.watchdog()
	sd.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	buf := make([]byte, 4096)
	if k, err := sd.conn.Read(buf); err == nil {
		t.Fatalf("after STOPPING=1 systemd got %q", buf[:k])
	}
}
