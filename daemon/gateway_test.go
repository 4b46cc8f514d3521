//go:build !norbd

package daemon

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	cephtest "github.com/nvmeof-tgt/nvmeof-tgt/test/ceph"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

func gatewayConfig(env map[string]string, name, conf, image, prefix string, cntlid int) string {
	return fmt.Sprintf(`
ceph: {conf: %s, user: %s, keyring: %s}
gateway: {name: %s, pool: %s, lease_prefix: %s, lease_seconds: 3, groups: [1]}
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - nqn: nqn.2026-11.io.example:gw
    serial: GWPAIR
    allow_any_host: true
    cntlid_min: %d
    cntlid_max: %d
    namespaces:
      - {nsid: 1, backend: rbd, pool: %s, image: %s, uuid: 6f1d7a2c-3b44-4e55-8a66-7b8c9d0e1f21}
`, conf, env["CEPH_USER"], env["CEPH_KEYRING"], name, env["CEPH_POOL"], prefix, cntlid, cntlid+99, env["CEPH_POOL"], image)
}

// waitGroup polls d's lease of group 1 until it is st, for at most limit.
func waitGroup(t *testing.T, d *Daemon, st gateway.State, limit time.Duration) time.Duration {
	t.Helper()
	// The runner's state changes first, then Publish sets the port's ANA
	// state: a host sees the group move only once both have.
	ana := nvme.ANAInaccessible
	if st == gateway.Owner {
		ana = nvme.ANAOptimized
	}
	start := time.Now()
	for d.gateway.runner(1).Status().State != st || anaOf(d) != ana {
		if time.Since(start) > limit {
			t.Fatalf("%s: group 1 is %v, ANA %v, after %v; want %v, %v", d.gateway.name, d.gateway.runner(1).Status(), anaOf(d), limit, st, ana)
		}
		time.Sleep(20 * time.Millisecond) // polling the cluster's answer
	}
	return time.Since(start)
}

func anaOf(d *Daemon) nvme.ANAState { return d.target.Port(1).ANAState(1) }

// gatewayOnCluster is the test cluster (test/ceph) for a gateway pair on
// fake RDMA: a new image named after name, the prefix of the group's
// lease objects, and daemon B's conf path, the same file named another way
// so that B has a cluster connection of its own.
func gatewayOnCluster(t *testing.T, name string) (env map[string]string, image, prefix, confB string) {
	t.Helper()
	env = cephtest.Use(t)
	useFakeRDMA(t)
	image = cephtest.CreateImage(t, env, name)
	confB = filepath.Dir(env["CEPH_CONF"]) + "/./" + filepath.Base(env["CEPH_CONF"])
	return env, image, "test." + image, confB
}

// The gateway pair against a real single-node cluster (test/ceph, as
// root), with two daemons in this process. Each daemon has a cluster
// connection of its own, as two processes would: connections are shared
// per conf path, and daemon B names the same file another way.
func TestGatewayPairOnCluster(t *testing.T) {
	env, image, prefix, confB := gatewayOnCluster(t, "gw")

	a, err := Start(parse(t, gatewayConfig(env, "a", env["CEPH_CONF"], image, prefix, 1)), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(time.Second) })
	waitGroup(t, a, gateway.Owner, 10*time.Second)
	if anaOf(a) != nvme.ANAOptimized {
		t.Fatalf("a owns group 1 but reports %v", anaOf(a))
	}
	bLog := quietLogger()
	bEntries := logtest.NewLocal(bLog)
	b, err := Start(parse(t, gatewayConfig(env, "b", confB, image, prefix, 101)), bLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Stop(time.Second) })
	checkStandsBy(t, b)
	handOver(t, a, b, bEntries)
	takeOverSilentOwner(t, a, b)
}

// checkStandsBy checks that b, started while another daemon owns group 1,
// is inaccessible from the start, tries a few times and stays standby,
// and says so in get_state.
func checkStandsBy(t *testing.T, b *Daemon) {
	t.Helper()
	if anaOf(b) != nvme.ANAInaccessible {
		t.Fatalf("b started %v", anaOf(b))
	}
	tries := b.gateway.runner(1).Status().Ops
	deadline := time.Now().Add(30 * time.Second)
	for b.gateway.runner(1).Status().Ops < tries+3 {
		if time.Now().After(deadline) {
			t.Fatalf("b finished %d lease operations in 30 s, want 3", b.gateway.runner(1).Status().Ops-tries)
		}
		time.Sleep(10 * time.Millisecond) // spaces the checks; the count decides
	}
	if s := b.gateway.runner(1).Status(); s.State != gateway.Standby || anaOf(b) != nvme.ANAInaccessible {
		t.Fatalf("b while a owns the group: %+v, %v", s, anaOf(b))
	}
	if st := api.StateOf(b); st.Gateway == nil || st.Gateway.Groups[0].State != "standby" || st.Ports[0].ANA[1] != "inaccessible" {
		t.Fatalf("b's get_state: %+v", st)
	}
}

// handOver releases group 1 from its owner a to the standby b, whose log
// bEntries records.
func handOver(t *testing.T, a, b *Daemon, bEntries *logtest.Hook) {
	// Planned handover: a is inaccessible when the call returns; b takes
	// the group within a renewal interval, without fencing.
	if r, err := releaseGroup(t, a, 1); err != nil || !r.Released {
		t.Fatalf("release: %v %v", r, err)
	}
	if anaOf(a) != nvme.ANAInaccessible {
		t.Fatalf("a after the release: %v", anaOf(a))
	}
	// a notifies the lease object, which b watches: b tries at once
	// rather than at its next interval (0.75 s). That b heard it is what
	// is checked, not how soon b took over: a loaded machine can take
	// longer than an interval either way.
	took := waitGroup(t, b, gateway.Owner, 10*time.Second)
	t.Logf("planned handover: b optimized %v after a's release", took)
	if !slices.ContainsFunc(bEntries.AllEntries(), func(e *logrus.Entry) bool { return strings.Contains(e.Message, "lease object notified") }) {
		t.Fatal("b took the group over without hearing a's release on the lease object")
	}
	if anaOf(b) != nvme.ANAOptimized || b.gateway.runner(1).Status().Fencings != 0 {
		t.Fatalf("b after the handover: %v, %+v", anaOf(b), b.gateway.runner(1).Status())
	}
	if _, err := releaseGroup(t, a, 1); err == nil {
		t.Fatal("a released a group it does not own")
	}
}

// takeOverSilentOwner stops the owner b's lease loop and checks that the
// standby a takes group 1 over and fences b's cluster client.
func takeOverSilentOwner(t *testing.T, a, b *Daemon) {
	// b dies without releasing (its lease loop stops; its client stays):
	// a takes over once the lease expired, fencing b's client.
	bLease := b.gateway.leases[0]
	bAddr, err := bLease.Self()
	if err != nil {
		t.Fatal(err)
	}
	b.gateway.cancel()
	<-b.gateway.runners[0].Done()
	died := time.Now()
	waitGroup(t, a, gateway.Owner, 10*time.Second)
	t.Logf("takeover after a silent owner: a optimized %v after b stopped renewing", time.Since(died))
	if st := a.gateway.runner(1).Status(); st.Fencings != 1 || anaOf(a) != nvme.ANAOptimized {
		t.Fatalf("a after the takeover: %+v, %v", st, anaOf(a))
	}
	if err := bLease.Lock(false); !errors.Is(err, syscall.ESHUTDOWN) {
		t.Fatalf("b's client %s after a's takeover: %v, want ESHUTDOWN (blocklisted)", bAddr, err)
	}
	// b's namespace writes are refused too: its rbd image shares the client.
	ns := b.target.Subsystem("nqn.2026-11.io.example:gw").Namespace(1)
	if err := ns.Backend.WriteAt(make([]byte, 512), 0); !errors.Is(err, syscall.ESHUTDOWN) {
		t.Fatalf("b's image write after fencing: %v", err)
	}
}
