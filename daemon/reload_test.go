package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// fakeListener stands in for an RDMA listener.
type fakeListener struct {
	port   *fabrics.Port
	closed bool
}

func (f *fakeListener) Close(time.Duration) { f.closed = true }

// fakeRDMA replaces listen for the test; refuse makes a port's listen fail.
type fakeRDMA struct {
	opened []*fakeListener
	refuse map[uint16]bool
}

func useFakeRDMA(t *testing.T) *fakeRDMA {
	f := &fakeRDMA{refuse: map[uint16]bool{}}
	old := listen
	listen = func(_ *fabrics.Target, p *fabrics.Port, _ *logrus.Entry) (portListener, error) {
		if f.refuse[p.ID] {
			return nil, errors.New("address not owned by an RDMA device")
		}
		l := &fakeListener{port: p}
		f.opened = append(f.opened, l)
		return l, nil
	}
	t.Cleanup(func() { listen = old })
	return f
}

func quietLogger() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

func parse(t *testing.T, y string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return c
}

const (
	nqnA = "nqn.2026-11.io.example:a"
	nqnB = "nqn.2026-11.io.example:b"
)

func baseConfig(dir string, extra string) string {
	return fmt.Sprintf(`
control: {socket: %s/ctl.sock}
ports: [{id: 1, address: 10.0.0.1}]
subsystems:
  - nqn: %s
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: nullblk, size: 64MiB}
  - nqn: %s
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: file, path: %s/b1.img, size: 16MiB}
%s`, dir, nqnA, nqnB, dir, extra)
}

func nsids(d *Daemon, nqn string) []uint32 {
	s := d.target.Subsystem(nqn)
	if s == nil {
		return nil
	}
	return s.NamespaceIDs()
}

// startBase starts a daemon from baseConfig over the fake transport.
func startBase(t *testing.T) (*fakeRDMA, string, *Daemon) {
	t.Helper()
	rdma := useFakeRDMA(t)
	dir := t.TempDir()
	d, err := Start(parse(t, baseConfig(dir, "")), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(time.Second) })
	return rdma, dir, d
}

func TestApplyChangesOnlyTheDifference(t *testing.T) {
	rdma, dir, d := startBase(t)
	if len(rdma.opened) != 1 {
		t.Fatalf("%d listeners, want 1", len(rdma.opened))
	}
	subA := d.target.Subsystem(nqnA)
	nsA1 := subA.Namespace(1)

	// Add a namespace to a, remove b's, add subsystem c on a new port.
	next := parse(t, fmt.Sprintf(`
control: {socket: %s/ctl.sock}
ports: [{id: 1, address: 10.0.0.1}, {id: 2, address: 10.0.0.1, port: 4421}]
subsystems:
  - nqn: %s
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: nullblk, size: 64MiB}
      - {nsid: 2, backend: file, path: %s/a2.img, size: 8MiB, block_size: 4096}
  - nqn: %s
    allow_any_host: true
    namespaces: []
  - nqn: nqn.2026-11.io.example:c
    allow_any_host: false
    hosts: [nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000c]
    ports: [2]
    namespaces: [{nsid: 7, backend: nullblk, size: 1GiB}]
`, dir, nqnA, dir, nqnB))
	if err := d.Apply(next); err != nil {
		t.Fatal(err)
	}
	if d.target.Subsystem(nqnA) != subA || subA.Namespace(1) != nsA1 {
		t.Fatal("an unchanged subsystem or namespace was rebuilt")
	}
	if got := nsids(d, nqnA); !slices.Equal(got, []uint32{1, 2}) {
		t.Fatalf("a has namespaces %v", got)
	}
	if got := nsids(d, nqnB); len(got) != 0 {
		t.Fatalf("b has namespaces %v, want none", got)
	}
	if got := nsids(d, "nqn.2026-11.io.example:c"); !slices.Equal(got, []uint32{7}) {
		t.Fatalf("c has namespaces %v", got)
	}
	if len(rdma.opened) != 2 || rdma.opened[0].closed || rdma.opened[1].port.ServiceID != 4421 {
		t.Fatal("the unchanged port was reopened, or the new one not opened")
	}
	if _, err := os.Stat(filepath.Join(dir, "a2.img")); err != nil {
		t.Fatal(err)
	}
	if gen, ok, _ := d.Generation(); gen != 2 || !ok {
		t.Fatalf("generation %d ok %v, want 2 true", gen, ok)
	}

	// Back to the start: c and port 2 go, b gets its namespace back.
	if err := d.Apply(parse(t, baseConfig(dir, ""))); err != nil {
		t.Fatal(err)
	}
	if d.target.Subsystem("nqn.2026-11.io.example:c") != nil || !rdma.opened[1].closed || d.target.Port(2) != nil {
		t.Fatal("subsystem c or port 2 survived")
	}
	if got := nsids(d, nqnB); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("b has namespaces %v", got)
	}
}

func TestApplyFailureLeavesTargetAsItWas(t *testing.T) {
	rdma, dir, d := startBase(t)
	before := d.Running()

	// A backend that cannot open: nothing changes, not even the part that could.
	bad := parse(t, baseConfig(dir, `  - nqn: nqn.2026-11.io.example:c
    allow_any_host: true
    namespaces: [{nsid: 1, backend: block, path: `+dir+`/no-such-device}]
`))
	bad.Subsystems[0].Namespaces = nil // would remove a's namespace
	if err := d.Apply(bad); err == nil || !strings.Contains(err.Error(), "subsystems[2].namespaces[0]") {
		t.Fatalf("apply with a missing block device: %v", err)
	}
	if !reflect.DeepEqual(d.Running(), before) || len(nsids(d, nqnA)) != 1 || d.target.Subsystem("nqn.2026-11.io.example:c") != nil {
		t.Fatal("a failed apply changed the target")
	}

	// A port nobody can listen on: the same.
	rdma.refuse[9] = true
	withPort := parse(t, baseConfig(dir, ""))
	withPort.Ports = append(withPort.Ports, config.Port{ID: 9, Transport: "rdma", Address: "10.0.0.9", Port: 4420, InlineDataSize: 8192, MaxQueueSize: 128})
	withPort.Subsystems = withPort.Subsystems[:1]
	if err := d.Apply(withPort); err == nil || !strings.Contains(err.Error(), "ports[1]") {
		t.Fatalf("apply with an unusable port: %v", err)
	}
	if d.target.Subsystem(nqnB) == nil || d.target.Port(9) != nil {
		t.Fatal("a failed apply changed the target")
	}

	// An invalid file is rejected whole by reload, and recorded as such.
	path := filepath.Join(dir, "broken.yaml")
	os.WriteFile(path, []byte("ports: [{id: 1, address: 10.0.0.1}]\nsubsystems: [{nqn: x, namespaces: [{nsid: 0}]}]\n"), 0o600)
	if err := d.Reload(path); err == nil || !strings.Contains(err.Error(), "subsystems[0]") {
		t.Fatalf("reload of a broken file: %v", err)
	}
	if gen, ok, _ := d.Generation(); gen != 1 || ok {
		t.Fatalf("after a rejected reload: generation %d ok %v, want 1 false", gen, ok)
	}
	if !reflect.DeepEqual(d.Running(), before) {
		t.Fatal("a rejected reload changed the running configuration")
	}
}

func TestControlRoundTrip(t *testing.T) {
	_, dir, d := startBase(t)
	host := "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000aa"
	steps := [][]string{
		{"add", "port", "-id", "2", "-address", "10.0.0.2", "-port", "4430"},
		{"add", "subsystem", "blktests-subsystem-1", "-port", "2", "-host", host},
		{"add", "namespace", "blktests-subsystem-1", "-backend", "file", "-path", dir + "/bt.img", "-size", "32MiB", "-uuid", "91fdba0d-f87b-4c25-b80f-db7be1418b9e"},
		{"add", "namespace", "blktests-subsystem-1", "-backend", "nullblk", "-size", "1GiB", "-block-size", "4096"},
		{"remove", "namespace", nqnA, "1"},
		{"add", "host", nqnB, host},
		{"set", "subsystem", nqnB, "-allow-any-host=false"},
	}
	for _, args := range steps {
		var out bytes.Buffer
		if err := control(d, "", args, &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	for _, bad := range [][]string{
		{"add", "host", "blktests-subsystem-1", host},     // twice
		{"remove", "host", "blktests-subsystem-1", host},  // nobody could connect
		{"remove", "namespace", nqnA, "1"},                // gone
		{"add", "subsystem", nqnA},                        // exists
		{"add", "namespace", nqnA, "-backend", "nullblk"}, // no size
		{"remove", "port", "7"},
		{"frobnicate"},
	} {
		if err := control(d, "", bad, io.Discard); err == nil {
			t.Fatalf("%v succeeded", bad)
		}
	}
	st := api.StateOf(d)
	var bt *api.SubState
	for i := range st.Subsystems {
		if st.Subsystems[i].NQN == "blktests-subsystem-1" {
			bt = &st.Subsystems[i]
		}
	}
	if bt == nil || len(bt.Namespaces) != 2 || bt.Namespaces[0].UUID != "91fdba0d-f87b-4c25-b80f-db7be1418b9e" ||
		bt.Namespaces[1].NSID != 2 || bt.AllowAnyHost || !slices.Equal(bt.Hosts, []string{host}) {
		t.Fatalf("ctl state: %+v", bt)
	}

	// Save, start a second daemon from the file: the same state.
	var saved bytes.Buffer
	if err := control(d, "", []string{"save", "-"}, &saved); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(saved.Bytes())
	if err != nil {
		t.Fatalf("saved configuration does not load: %v\n%s", err, saved.String())
	}
	d.Stop(time.Second)
	d2, err := Start(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Stop(time.Second)
	st2 := api.StateOf(d2)
	st.Generation = st2.Generation // counts changes, not state
	if !reflect.DeepEqual(st, st2) {
		t.Fatalf("state after restart from the saved file differs:\n%+v\n%+v", st, st2)
	}
}

// What fails after the target started changing is named, and the rest
// stays applied. A port that could not listen again stays configured (the
// subsystems' port lists name it) and the next change retries it.
func TestApplyInPart(t *testing.T) {
	rdma, dir, d := startBase(t)
	next := parse(t, baseConfig(dir, `  - nqn: nqn.2026-11.io.example:c
    allow_any_host: true
    namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]
`))
	// Port 1 changes in place: its listener closes first, then reopens.
	next.Ports[0].InlineDataSize = 4096
	rdma.refuse[1] = true
	err := d.Apply(next)
	var partial *partialError
	if !errors.As(err, &partial) || !strings.Contains(err.Error(), "ports[0]") {
		t.Fatalf("apply: %v, want a partial error naming ports[0]", err)
	}
	if d.target.Subsystem("nqn.2026-11.io.example:c") == nil {
		t.Fatal("the part that could be applied was not")
	}
	run := d.Running()
	if len(run.Ports) != 1 || len(run.Subsystems) != 3 || d.listeners[1] != nil || d.target.Port(1) != nil {
		t.Fatalf("running configuration has %d ports and %d subsystems, want 1 (not listening) and 3", len(run.Ports), len(run.Subsystems))
	}
	if gen, _, _ := d.Generation(); gen != 2 {
		t.Fatalf("generation %d, want 2", gen)
	}

	// An unrelated change is valid and brings the port back.
	rdma.refuse[1] = false
	run.Subsystems[0].Hosts = append(run.Subsystems[0].Hosts, config.HostNQN("nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000aa"))
	if err := d.Apply(run); err != nil {
		t.Fatalf("a later change: %v", err)
	}
	if d.listeners[1] == nil || d.target.Port(1) == nil || d.target.Port(1).InlineDataSize != 4096 {
		t.Fatal("the port that could not listen was not set up again by the next change")
	}
}

// A namespace whose size alone changes is resized in place: hosts keep it.
// A file namespace does not shrink.
func TestApplyResizesInPlace(t *testing.T) {
	_, dir, d := startBase(t)
	ns := d.target.Subsystem(nqnB).Namespace(1)
	grown := parse(t, strings.Replace(baseConfig(dir, ""), "size: 16MiB", "size: 48MiB", 1))
	if err := d.Apply(grown); err != nil {
		t.Fatal(err)
	}
	if d.target.Subsystem(nqnB).Namespace(1) != ns || ns.Blocks() != 48<<20/512 {
		t.Fatalf("namespace replaced or not grown: %d blocks", ns.Blocks())
	}
	if fi, err := os.Stat(filepath.Join(dir, "b1.img")); err != nil || fi.Size() != 48<<20 {
		t.Fatalf("backing file: %v %v", fi.Size(), err)
	}
	var out bytes.Buffer
	if err := control(d, "", []string{"set", "namespace", nqnA, "1", "-size", "128MiB"}, &out); err != nil {
		t.Fatal(err)
	}
	if got := d.target.Subsystem(nqnA).Namespace(1).Blocks(); got != 128<<20/512 {
		t.Fatalf("nullblk namespace has %d blocks after ctl set namespace", got)
	}
	err := d.Apply(parse(t, baseConfig(dir, "")))
	var partial *partialError
	if !errors.As(err, &partial) || !strings.Contains(err.Error(), "subsystems[1].namespaces[0].size") {
		t.Fatalf("shrinking a file namespace: %v", err)
	}
	run := d.Running()
	i, j := findNS(run, nqnB, 1)
	if ns.Blocks() != 48<<20/512 || run.Subsystems[i].Namespaces[j].Size != 48<<20 {
		t.Fatal("a refused shrink changed the namespace or the running configuration")
	}
}

// Limits come from the file at start and follow it on reload, without
// rebuilding anything; a subsystem added through ctl gets the defaults.
func TestLimitsApplied(t *testing.T) {
	_, dir, d := startBase(t)
	subA := d.target.Subsystem(nqnA)
	if c, q := subA.Limits(); c != config.DefaultMaxControllers || q != config.DefaultMaxIOQueues {
		t.Fatalf("limits at start %d/%d, want the defaults", c, q)
	}
	if _, limit := d.target.QueuePairs(); limit != config.DefaultMaxQueuePairs {
		t.Fatalf("queue pair limit %d, want %d", limit, config.DefaultMaxQueuePairs)
	}
	next := parse(t, strings.Replace(baseConfig(dir, "limits: {max_queue_pairs: 40}"),
		"  - nqn: "+nqnA+"\n", "  - nqn: "+nqnA+"\n    max_controllers: 3\n    max_io_queues: 2\n", 1))
	if err := d.Apply(next); err != nil {
		t.Fatal(err)
	}
	if d.target.Subsystem(nqnA) != subA {
		t.Fatal("a limit change rebuilt the subsystem")
	}
	if c, q := subA.Limits(); c != 3 || q != 2 {
		t.Fatalf("limits after reload %d/%d, want 3/2", c, q)
	}
	if _, limit := d.target.QueuePairs(); limit != 40 {
		t.Fatalf("queue pair limit after reload %d, want 40", limit)
	}
	var out bytes.Buffer
	if err := control(d, "", []string{"add", "subsystem", "nqn.2026-11.io.example:c", "-allow-any-host"}, &out); err != nil {
		t.Fatalf("ctl add subsystem: %v", err)
	}
	if c, q := d.target.Subsystem("nqn.2026-11.io.example:c").Limits(); c != config.DefaultMaxControllers || q != config.DefaultMaxIOQueues {
		t.Fatalf("limits of a subsystem added through ctl %d/%d, want the defaults", c, q)
	}
}

// When the target refuses a port the plan adds (it already has one with
// that ID: the target and the running configuration disagree), the port
// is named and its new listener closed; it stays in the running
// configuration, not listening, for the next change to retry. AddPort's error used to be dropped: apply succeeded and
// the listener served a port the target knew by other settings.
func TestApplyReportsPortTheTargetRefuses(t *testing.T) {
	rdma, dir, d := startBase(t)
	stale := &fabrics.Port{ID: 2, ServiceID: 4999}
	if err := d.target.AddPort(stale); err != nil {
		t.Fatal(err)
	}
	next := parse(t, baseConfig(dir, ""))
	next.Ports = append(next.Ports, config.Port{ID: 2, Transport: "rdma", Address: "10.0.0.2", Port: 4420, InlineDataSize: 8192, MaxQueueSize: 128})
	err := d.Apply(next)
	var partial *partialError
	if !errors.As(err, &partial) || !strings.Contains(err.Error(), "ports[1]: port 2 already exists") {
		t.Fatalf("apply: %v, want a partial error naming ports[1]", err)
	}
	if len(rdma.opened) != 2 || !rdma.opened[1].closed {
		t.Fatal("the refused port's listener was left open")
	}
	if run := d.Running(); len(run.Ports) != 2 || d.listeners[2] != nil || d.target.Port(2) != stale {
		t.Fatalf("running configuration has ports %+v", run.Ports)
	}
}

// A subsystem the target refuses is left out of the running configuration,
// which used to claim it.
func TestApplyLeavesOutSubsystemTheTargetRefuses(t *testing.T) {
	_, dir, d := startBase(t)
	const nqnC = "nqn.2026-11.io.example:c"
	if err := d.target.AddSubsystem(fabrics.NewSubsystem(nqnC, "stale", "stale", false)); err != nil {
		t.Fatal(err)
	}
	err := d.Apply(parse(t, baseConfig(dir, "  - {nqn: "+nqnC+", allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 1GiB}]}\n")))
	if err == nil || !strings.Contains(err.Error(), "subsystems[2]: subsystem "+nqnC+" already exists") {
		t.Fatalf("apply: %v", err)
	}
	if run := d.Running(); len(run.Subsystems) != 2 {
		t.Fatalf("running configuration has %d subsystems, want 2", len(run.Subsystems))
	}
	if s := d.target.Subsystem(nqnC); s.Serial != "stale" || len(s.NamespaceIDs()) != 0 {
		t.Fatal("the refused subsystem's namespace was added to the one running")
	}
}

// A reload that changes only ports' ANA states and namespaces' ANA groups
// keeps the listener, the port and the namespaces.
func TestApplyChangesANAInPlace(t *testing.T) {
	rdma, dir, d := startBase(t)
	port, ns := d.target.Port(1), d.target.Subsystem(nqnA).Namespace(1)
	y := strings.Replace(baseConfig(dir, ""), "{id: 1, address: 10.0.0.1}", "{id: 1, address: 10.0.0.1, ana: {2: inaccessible, 3: change}}", 1)
	y = strings.Replace(y, "{nsid: 1, backend: nullblk, size: 64MiB}", "{nsid: 1, backend: nullblk, size: 64MiB, ana_group: 2}", 1)
	if err := d.Apply(parse(t, y)); err != nil {
		t.Fatal(err)
	}
	if len(rdma.opened) != 1 || rdma.opened[0].closed || d.target.Port(1) != port || d.target.Subsystem(nqnA).Namespace(1) != ns {
		t.Fatal("the listener, port or namespace was replaced")
	}
	if port.ANAState(2) != nvme.ANAInaccessible || port.ANAState(3) != nvme.ANAChange || port.ANAState(1) != nvme.ANAOptimized {
		t.Fatalf("port states %v", port.ANAStates())
	}
	if ns.ANAGroup() != 2 {
		t.Fatalf("namespace in group %d, want 2", ns.ANAGroup())
	}
	if run := d.Running(); run.Ports[0].ANAState(3) != config.ANAChange || run.Subsystems[0].Namespaces[0].Group() != 2 {
		t.Fatalf("running configuration: %+v", run.Ports[0])
	}
	// Back to the base: every group optimized, the namespace in group 1.
	if err := d.Apply(parse(t, baseConfig(dir, ""))); err != nil {
		t.Fatal(err)
	}
	if len(port.ANAStates()) != 0 || ns.ANAGroup() != 1 || len(rdma.opened) != 1 {
		t.Fatalf("after reverting: states %v, group %d, %d listeners", port.ANAStates(), ns.ANAGroup(), len(rdma.opened))
	}
}
