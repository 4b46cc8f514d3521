//go:build !norbd

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/sirupsen/logrus"
)

// sharedGatewayConfig is gatewayConfig with the subsystems kept by the
// group (shared_config), this daemon handing out controller IDs cntlid to
// cntlid+99; withSubsystems false leaves the file without them.
func sharedGatewayConfig(env map[string]string, name, conf, image, prefix string, cntlid int, withSubsystems bool) string {
	y := gatewayConfig(env, name, conf, image, prefix, cntlid)
	y = strings.Replace(y, "groups: [1]}", fmt.Sprintf("groups: [1], shared_config: true, cntlid_min: %d, cntlid_max: %d}", cntlid+1000, cntlid+1099), 1)
	if !withSubsystems {
		y = y[:strings.Index(y, "subsystems:")]
	}
	return y
}

// hasNamespace reports whether d runs namespace nsid of the gateway's
// subsystem, and whether host is let in.
func hasNamespace(d *Daemon, nsid uint32, host string) bool {
	c := d.Running()
	if len(c.Subsystems) == 0 {
		return false
	}
	s := c.Subsystems[0]
	ns, hostIn := false, host == ""
	for _, n := range s.Namespaces {
		ns = ns || n.NSID == nsid
	}
	for _, h := range s.Hosts {
		hostIn = hostIn || h.NQN == host
	}
	return ns && hostIn && d.target.Subsystem(s.NQN).Namespace(nsid) != nil
}

// Two gateways with a shared configuration on the real cluster: the
// first creates it from its file, the second, whose file has no
// subsystems, serves the group's; a change through either reaches the
// other without a restart; a change made from an older version, or one
// that would put a secret in clear, is refused and undone.
func TestSharedConfigOnCluster(t *testing.T) {
	env, image, prefix, confB := gatewayOnCluster(t, "shared")
	a, err := Start(parse(t, sharedGatewayConfig(env, "a", env["CEPH_CONF"], image, prefix, 1, true)), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(time.Second) })
	b, err := Start(parse(t, sharedGatewayConfig(env, "b", confB, image, prefix, 101, false)), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })
	if !hasNamespace(b, 1, "") {
		t.Fatalf("b does not serve the group's namespace: %+v", b.Running().Subsystems)
	}
	if s := b.Running().Subsystems[0]; s.CntlidMin != 1101 || s.CntlidMax != 1200 {
		t.Fatalf("b hands out controller IDs %d..%d, want its own 1101..1200", s.CntlidMin, s.CntlidMax)
	}
	// Through b: a namespace and a host; a has them soon after (notified).
	const host = "nqn.2014-08.org.nvmexpress:uuid:6c3b5f1e-0000-4000-8000-000000000001"
	next := b.Running()
	next.Subsystems[0].Namespaces = append(next.Subsystems[0].Namespaces, config.Namespace{NSID: 2, Backend: "nullblk", Size: 1 << 20, ANAGroup: 2})
	next.Subsystems[0].Hosts = append(next.Subsystems[0].Hosts, config.HostNQN(host))
	next.ApplyDefaults()
	if err := b.Apply(next); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for !hasNamespace(a, 2, host) {
		if time.Since(start) > sharedPoll/2 {
			t.Fatalf("a has not applied b's change %v later (notified: it should at once)", time.Since(start))
		}
		time.Sleep(20 * time.Millisecond) // polling the other daemon's state
	}
	t.Logf("a applied b's change %v after b's edit returned", time.Since(start))
	if a.shared.version.Load() != 2 || b.shared.version.Load() != 2 {
		t.Fatalf("versions %d and %d, want 2", a.shared.version.Load(), b.shared.version.Load())
	}
	// b edits from version 1 (as if it had missed version 2): refused,
	// and b runs what it ran.
	b.shared.version.Store(1)
	stale := b.Running()
	stale.Subsystems[0].Namespaces = stale.Subsystems[0].Namespaces[:1]
	if err := b.Apply(stale); !errors.Is(err, errSharedConflict) {
		t.Fatalf("a change from an older version: %v", err)
	}
	if !hasNamespace(b, 2, host) {
		t.Fatal("the refused change was not undone on b")
	}
	// b catches up (poked by the conflict).
	for start = time.Now(); b.shared.version.Load() != 2; {
		if time.Since(start) > sharedPoll/2 {
			t.Fatal("b did not catch up after the conflict")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A host with an inline secret, and no secret_key_file: refused.
	secret := a.Running()
	secret.Subsystems[0].Hosts = append(secret.Subsystems[0].Hosts, config.Host{NQN: host + "2", DHCHAPKey: "DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:"})
	if err := a.Apply(secret); err == nil || !strings.Contains(err.Error(), "secret_key_file") {
		t.Fatalf("an inline secret without a key: %v", err)
	}
	if n := len(a.Running().Subsystems[0].Hosts); n != 1 {
		t.Fatalf("a runs %d hosts after the refused change, want 1", n)
	}
}

// failingStore is a shared configuration object the cluster does not
// answer for.
type failingStore struct{ data []byte }

func (f *failingStore) ReadAll() ([]byte, error) { return f.data, nil }
func (f *failingStore) Replace(string, string, string, []byte) error {
	return fmt.Errorf("rados: %w", syscall.ETIMEDOUT)
}
func (f *failingStore) Watch(func()) error { return syscall.ENOTCONN }
func (f *failingStore) WatchError() error  { return syscall.ENOTCONN }
func (f *failingStore) Unwatch()           {}
func (f *failingStore) Notify() error      { return syscall.ETIMEDOUT }
func (f *failingStore) Close()             {}

// An unreachable cluster refuses the change, which is undone here.
func TestSharedConfigUnreachableRefuses(t *testing.T) {
	useFakeRDMA(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "disk")
	os.WriteFile(img, make([]byte, 1<<20), 0o600)
	d, err := Start(parse(t, fmt.Sprintf(`
ports: [{id: 1, address: 10.0.0.1}]
subsystems: [{nqn: nqn.2026-11.io.example:s, allow_any_host: true, namespaces: [{nsid: 1, backend: file, path: %s}]}]
`, img)), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop(time.Second)
	d.shared = &sharedConfig{store: &failingStore{}, wake: make(chan struct{}, 1), log: logrus.NewEntry(quietLogger())}
	// The gateway block as the running configuration would have it (its
	// leases are not started: nothing here reaches a cluster).
	d.mu.Lock()
	d.cfg.Gateway = &config.Gateway{Name: "gw-a", Pool: "rbd", LeasePrefix: "p", LeaseSeconds: 10, FailbackDelay: 15, RebalanceSeconds: 10,
		Groups: []config.GatewayGroup{{ID: 5}}, SharedConfig: true, CntlidMin: 1, CntlidMax: 99,
		Ceph: config.Ceph{Conf: config.DefaultCephConf, User: config.DefaultCephUser}}
	d.cfg.Subsystems[0].CntlidMin, d.cfg.Subsystems[0].CntlidMax = 1, 99
	d.mu.Unlock()
	next := d.Running()
	next.Subsystems[0].Namespaces = append(next.Subsystems[0].Namespaces, config.Namespace{NSID: 2, Backend: "nullblk", Size: 1 << 20})
	next.ApplyDefaults()
	err = d.Apply(next)
	if err == nil || !strings.Contains(err.Error(), "cannot be written") || !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("a change the cluster cannot take: %v", err)
	}
	if d.target.Subsystem("nqn.2026-11.io.example:s").Namespace(2) != nil || len(d.Running().Subsystems[0].Namespaces) != 1 {
		t.Fatal("the refused change still runs")
	}
	// A subsystem's own controller IDs: refused, each gateway has its own.
	ids := d.Running()
	ids.Subsystems[0].CntlidMax = 50
	if err := d.Apply(ids); err == nil || !strings.Contains(err.Error(), "gateway.cntlid_min and cntlid_max") {
		t.Fatalf("a subsystem's own controller IDs: %v", err)
	}
	// A change of this daemon's own settings alone is not shared.
	own := d.Running()
	own.Ports = append(own.Ports, config.Port{ID: 2, Address: "10.0.0.2"})
	own.ApplyDefaults()
	if err := d.Apply(own); err != nil {
		t.Fatalf("a port added: %v", err)
	}
}
