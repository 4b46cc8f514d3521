package metrics

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/dhchap"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/metrics/metricstest"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// testCollector is the daemon's collector of tg, at configuration generation 1.
func testCollector(tg *fabrics.Target) *Collector {
	return &Collector{Target: tg, Generation: func() (uint64, bool, time.Time) { return 1, true, time.Now() }}
}

// gaugeValues scrapes c and returns the value of every series of the
// gauge name, keyed by its subsystem and port labels.
func gaugeValues(t *testing.T, c *Collector, name string) map[[2]string]float64 {
	t.Helper()
	got := map[[2]string]float64{}
	for _, sm := range metricstest.Scrape(t, c, name) {
		got[[2]string{sm.Labels["subsystem"], sm.Labels["port"]}] = sm.Value
	}
	return got
}

// TestConnectionGaugesReadZero: a subsystem without controllers still has
// its controllers and queue pairs series, at 0, on each port it is
// reachable through, so that they drop to 0 when the last host leaves
// instead of vanishing.
func TestConnectionGaugesReadZero(t *testing.T) {
	tg := fabrics.NewTarget(nil)
	for _, id := range []uint16{1, 2} {
		if err := tg.AddPort(&fabrics.Port{ID: id, ServiceID: 4420 + id}); err != nil {
			t.Fatal(err)
		}
	}
	every := fabrics.NewSubsystem("nqn.2026-11.io.example:every", "", "", true)
	one := fabrics.NewSubsystem("nqn.2026-11.io.example:one", "", "", true)
	one.SetPorts([]uint16{2})
	for _, s := range []*fabrics.Subsystem{every, one} {
		if err := tg.AddSubsystem(s); err != nil {
			t.Fatal(err)
		}
	}
	c := &Collector{Target: tg, Generation: func() (uint64, bool, time.Time) { return 1, true, time.Now() }}
	want := map[[2]string]float64{
		{every.NQN, "1"}: 0,
		{every.NQN, "2"}: 0,
		{one.NQN, "2"}:   0,
	}
	for _, name := range []string{"nvmeof_tgt_controllers", "nvmeof_tgt_queue_pairs"} {
		got := gaugeValues(t, c, name)
		if len(got) != len(want) {
			t.Errorf("%s: series %v, want %v", name, got, want)
			continue
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s{subsystem=%q,port=%q}: %v (present %v), want %v", name, k[0], k[1], g, ok, v)
			}
		}
	}
}

// nullNamespace is a 1 MiB nullblk namespace nsid.
func nullNamespace(t *testing.T, nsid uint32) *fabrics.Namespace {
	t.Helper()
	b, err := backend.Open("nullblk", backend.Options{Size: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := fabrics.NewNamespace(nsid, b, false, [16]byte{byte(nsid)})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// nvmeof_tgt_ana_state has, for every group a port serves a namespace of
// or gives a state, one series per state: 1 for the current one.
func TestANAStateGauge(t *testing.T) {
	tg := fabrics.NewTarget(nil)
	p := &fabrics.Port{ID: 1, ServiceID: 4420}
	if err := p.SetANAStates(map[uint32]nvme.ANAState{4: nvme.ANAInaccessible, 9: nvme.ANAChange}); err != nil {
		t.Fatal(err)
	}
	if err := tg.AddPort(p); err != nil {
		t.Fatal(err)
	}
	s := fabrics.NewSubsystem("nqn.2026-11.io.example:ana", "", "", true)
	for nsid, g := range map[uint32]uint32{1: 1, 2: 4} {
		ns := nullNamespace(t, nsid)
		ns.SetANAGroup(g)
		if err := s.AddNamespace(ns); err != nil {
			t.Fatal(err)
		}
	}
	if err := tg.AddSubsystem(s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	got := map[string]float64{}
	for _, sm := range metricstest.Scrape(t, testCollector(tg), "nvmeof_tgt_ana_state") {
		got[sm.Labels["port"]+"/"+sm.Labels["group"]+"/"+sm.Labels["state"]] = sm.Value
	}
	if len(got) != 3*len(nvme.ANAStates) {
		t.Fatalf("%d series, want %d: %v", len(got), 3*len(nvme.ANAStates), got)
	}
	for _, on := range []string{"1/1/optimized", "1/4/inaccessible", "1/9/change"} {
		if got[on] != 1 {
			t.Errorf("%s = %v, want 1", on, got[on])
		}
	}
	var sum float64
	for _, v := range got {
		sum += v
	}
	if sum != 3 {
		t.Errorf("%v series at 1, want 3", sum)
	}
}

// A failed authentication is counted by subsystem, host and reason.
func TestAuthFailureMetric(t *testing.T) {
	const hostX = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000aa"
	secret, err := dhchap.ParseSecret("DHHC-1:01:ICcuNTxDSlFYX2ZtdHuCiZCXnqWss7rByM/W3eTr8vmMpzdS:")
	if err != nil {
		t.Fatal(err)
	}
	tg := fabrics.NewTarget(nil)
	tg.SetClock(&fabrics.ManualClock{})
	p := &fabrics.Port{ID: 1, ServiceID: 4420, MaxQueueSize: 128}
	tg.AddPort(p)
	s := fabrics.NewSubsystem("nqn.2026-11.io.example:auth", "", "", false)
	s.AllowHost(hostX)
	s.SetHostKeys(map[string]fabrics.HostKeys{hostX: {Host: secret}})
	tg.AddSubsystem(s)
	q := fabrics.NewLoopQueue(tg, p, 0, 32)
	defer q.Close()
	cmd := make(nvme.Command, nvme.CommandSize)
	cmd.SetConnect(0, 31, 0)
	cmd.SetFlags(nvme.PSDTSGLContig)
	cmd.SGL().SetKeyed(0, nvme.ConnectDataSize, 1, false)
	data := make([]byte, nvme.ConnectDataSize)
	nvme.ConnectData{CNTLID: 0xffff, SubNQN: s.NQN, HostNQN: hostX}.Encode(data)
	if rsp, err := q.Submit(cmd, data); err != nil || rsp.Status() != 0 || rsp.Result()&nvme.ConnectAuthReqATR == 0 {
		t.Fatalf("connect: %v %v", rsp, err)
	}
	// A Reply before any Negotiate: out of sequence.
	msg := nvme.AuthReplyMsg{TID: 1, R: make([]byte, 32)}.Encode()
	cmd = make(nvme.Command, nvme.CommandSize)
	cmd.SetAuth(true, uint32(len(msg)))
	cmd.SetFlags(nvme.PSDTSGLContig)
	cmd.SGL().SetKeyed(0, uint32(len(msg)), 1, false)
	if rsp, err := q.Submit(cmd, msg); err != nil || rsp.Status() != 0 {
		t.Fatalf("auth send: %v %v", rsp, err)
	}
	m := metricstest.Scrape(t, testCollector(tg), "nvmeof_tgt_authentication_failures_total")
	if len(m) != 1 || m[0].Value != 1 || m[0].Labels["host"] != hostX ||
		m[0].Labels["reason"] != "out_of_sequence" || m[0].Labels["subsystem"] != s.NQN {
		t.Fatalf("nvmeof_tgt_authentication_failures_total %+v, want one out_of_sequence failure of %s", m, hostX)
	}
}

// A queue pair that never sent Connect is counted on its port once the
// connect deadline disconnects it.
func TestConnectTimeoutMetric(t *testing.T) {
	tg := fabrics.NewTarget(nil)
	clk := &fabrics.ManualClock{}
	tg.SetClock(clk)
	p := &fabrics.Port{ID: 7, ServiceID: 4420, MaxQueueSize: 128}
	tg.AddPort(p)
	q := fabrics.NewLoopQueue(tg, p, 0, 32)
	defer q.Close()
	clk.Advance(fabrics.ConnectTimeout)
	m := metricstest.Scrape(t, testCollector(tg), "nvmeof_tgt_connect_timeouts_total")
	if len(m) != 1 || m[0].Value != 1 || len(m[0].Labels) != 1 || m[0].Labels["port"] != "7" {
		t.Fatalf("%+v, want one timeout on port 7", m)
	}
}

// sharedStub is a reservation store other daemons share, holding nothing.
type sharedStub struct{}

func (sharedStub) Load() (fabrics.ReservationState, error) { return fabrics.ReservationState{}, nil }
func (sharedStub) Store(fabrics.ReservationState) error    { return nil }
func (sharedStub) SharedReservations()                     {}

// nvmeof_tgt_reservation_unavailable: a series for each namespace with a
// shared reservation state, 1 while the daemon cannot read it; none for
// the others.
func TestReservationUnavailableGauge(t *testing.T) {
	tg := fabrics.NewTarget(nil)
	s := fabrics.NewSubsystem("nqn.2026-11.io.example:resv", "", "", true)
	var shared *fabrics.Namespace
	for nsid := uint32(1); nsid <= 2; nsid++ {
		ns := nullNamespace(t, nsid)
		if nsid == 2 {
			if err := ns.SetReservationStore(sharedStub{}); err != nil {
				t.Fatal(err)
			}
			shared = ns
		}
		if err := s.AddNamespace(ns); err != nil {
			t.Fatal(err)
		}
	}
	if err := tg.AddSubsystem(s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	values := func() map[string]float64 {
		got := map[string]float64{}
		for _, sm := range metricstest.Scrape(t, testCollector(tg), "nvmeof_tgt_reservation_unavailable") {
			got[sm.Labels["nsid"]] = sm.Value
		}
		return got
	}
	if got := values(); len(got) != 1 || got["2"] != 0 {
		t.Fatalf("series %v, want only nsid 2 at 0", got)
	}
	shared.SetReservationUnavailable(true)
	if got := values(); got["2"] != 1 {
		t.Fatalf("series %v while unavailable, want nsid 2 at 1", got)
	}
	shared.SetReservationUnavailable(false)
	if got := values(); got["2"] != 0 {
		t.Fatalf("series %v once available, want nsid 2 at 0", got)
	}
}
