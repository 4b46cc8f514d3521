package fabrics

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Protocol corners: exact statuses and controller state, as the NVMe base
// and fabrics specifications and the Linux target have them.

const ccEnableNVM = nvme.CCEnable | 6<<nvme.CCIOSQEShift | 4<<nvme.CCIOCQEShift

// adminOnly connects an admin queue without enabling the controller.
func adminOnly(t *testing.T, tg *Target, p *Port, subnqn string, kato uint32) *host {
	t.Helper()
	h, _ := connectAdminQueue(t, tg, p, subnqn, testHost, kato)
	return h
}

// connectAdminQueue connects an admin queue of hostNQN to subnqn and
// returns the Connect's completion too.
func connectAdminQueue(t *testing.T, tg *Target, p *Port, subnqn, hostNQN string, kato uint32) (*host, nvme.Completion) {
	t.Helper()
	h := &host{t: t, admin: NewLoopQueue(tg, p, 0, 32)}
	t.Cleanup(func() {
		if h.io != nil {
			h.io.Close()
		}
		h.admin.Close()
	})
	rsp := h.submit(h.admin, connectCmd(0, 31, kato, false), connectData(subnqn, hostNQN, 0xffff))
	if rsp.Status() != 0 {
		t.Fatalf("admin connect of %s: %v", hostNQN, rsp.Status())
	}
	h.cntl = uint16(rsp.Result())
	return h, rsp
}

func (h *host) ctrl() *Controller { return h.admin.Queue.Controller() }

func (h *host) propertyStatus(set, size8 bool, off uint32, v uint64) (uint64, nvme.Status) {
	c := newCmd(0)
	c.SetProperty(set, size8, off, v)
	rsp := h.submit(h.admin, c, nil)
	return rsp.Result(), rsp.Status()
}

func (h *host) feature(set bool, fid uint8, v uint32) (uint32, nvme.Status) {
	op := uint8(nvme.AdminGetFeatures)
	if set {
		op = nvme.AdminSetFeatures
	}
	c := newCmd(op)
	c.SetCDW(10, uint32(fid))
	c.SetCDW(11, v)
	rsp := h.submit(h.admin, c, nil)
	return uint32(rsp.Result()), rsp.Status()
}

// holdsAERs checks that the controller holds n Asynchronous Event
// Requests: SubmitAsync returns once the target has taken the command, and
// the target holds an AER on the spot when no event is waiting.
func holdsAERs(t *testing.T, c *Controller, n int) {
	t.Helper()
	c.mu.Lock()
	got := len(c.aers)
	c.mu.Unlock()
	if got != n {
		t.Fatalf("controller holds %d AERs, want %d", got, n)
	}
}

// Admin commands other than Fabrics ones need CC.EN=1 and CSTS.RDY=1, as
// nvmet_check_ctrl_status: before enabling and after a reset they get
// Command Sequence Error.
func TestAdminCommandsNeedEnabledController(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := adminOnly(t, tg, p, testNQN, 0)
	want := nvme.StatusCommandSequence | nvme.DNR
	if _, st := h.identify(nvme.CNSController, 0); st != want {
		t.Fatalf("identify before enable: %v, want %v", st, want)
	}
	if st := h.submit(h.admin, newCmd(nvme.AdminKeepAlive), nil).Status(); st != want {
		t.Fatalf("keep alive before enable: %v, want %v", st, want)
	}
	// Fabrics commands work all along.
	if vs := h.getProperty(nvme.RegVS, false); vs == 0 {
		t.Fatal("VS reads 0")
	}
	h.setProperty(nvme.RegCC, ccEnableNVM)
	if _, st := h.identify(nvme.CNSController, 0); st != 0 {
		t.Fatalf("identify once enabled: %v", st)
	}
	h.setProperty(nvme.RegCC, 0) // reset
	if _, st := h.identify(nvme.CNSController, 0); st != want {
		t.Fatalf("identify after reset: %v, want %v", st, want)
	}
	if _, st := h.feature(false, nvme.FeatKeepAlive, 0); st != want {
		t.Fatalf("get features after reset: %v, want %v", st, want)
	}
}

// recordingClock is a ManualClock that keeps every timer function it was
// given, so a test can run one that was stopped just as it fired.
type recordingClock struct {
	ManualClock
	funcs []func()
}

func (c *recordingClock) AfterFunc(d time.Duration, f func()) Timer {
	c.funcs = append(c.funcs, f)
	return c.ManualClock.AfterFunc(d, f)
}

func (c *recordingClock) last() func() { return c.funcs[len(c.funcs)-1] }

// The discovery controller takes CC without I/O queue entry sizes, has no
// I/O queues, and keeps a host that asked for no keep alive for 120 s.
func TestDiscoveryController(t *testing.T) {
	tg, p, _ := testTarget(t)
	clk := &ManualClock{}
	tg.SetClock(clk)
	h := adminOnly(t, tg, p, nvme.DiscoveryNQN, 0)
	if clk.Pending() != 1 {
		t.Fatalf("%d keep alive timers, want one", clk.Pending())
	}
	h.setProperty(nvme.RegCC, nvme.CCEnable) // IOSQES = IOCQES = 0
	if csts := h.getProperty(nvme.RegCSTS, false); csts != nvme.CSTSReady {
		t.Fatalf("CSTS %#x after enabling discovery with IOSQES=IOCQES=0, want RDY only", csts)
	}
	if kato, st := h.feature(false, nvme.FeatKeepAlive, 0); st != 0 || kato != discoveryKATO {
		t.Fatalf("KATO %d (%v), want %d", kato, st, discoveryKATO)
	}
	io := NewLoopQueue(tg, p, 1, 32)
	defer io.Close()
	rsp, err := io.Submit(connectCmd(1, 31, 0, true), connectData(nvme.DiscoveryNQN, testHost, h.cntl))
	if err != nil {
		t.Fatal(err)
	}
	if rsp.Status() != nvme.StatusConnectInvalidParam|nvme.DNR || rsp.Result() != nvme.ConnectSQEQID {
		t.Fatalf("I/O connect to discovery: %v IATTR/IPO %#x, want invalid parameter at the SQE's QID", rsp.Status(), rsp.Result())
	}
	// An I/O controller still insists on 64- and 16-byte entries.
	h2 := adminOnly(t, tg, p, testNQN, 0)
	h2.setProperty(nvme.RegCC, nvme.CCEnable)
	if csts := h2.getProperty(nvme.RegCSTS, false); csts&nvme.CSTSFatal == 0 || csts&nvme.CSTSReady != 0 {
		t.Fatalf("I/O controller CSTS %#x after IOSQES=0, want CFS", csts)
	}
}

// Every Connect refusal carries the status, DNR, and IATTR/IPO of the
// field at fault, at the offsets of nvmet's fabrics-cmd.c.
func TestConnectRefusalsPointAtTheField(t *testing.T) {
	tg, p, _ := testTarget(t)
	locked := NewSubsystem("nqn.2026-11.io.example:locked", "", "", false)
	if err := tg.AddSubsystem(locked); err != nil {
		t.Fatal(err)
	}
	h := connect(t, tg, p, testNQN)
	data := func(mod func([]byte)) []byte {
		b := connectData(testNQN, testHost, 0xffff)
		if mod != nil {
			mod(b)
		}
		return b
	}
	inData := func(off uint16) uint64 { return uint64(nvme.ConnectInvalidParam(off, true)) }
	invalid := nvme.StatusConnectInvalidParam | nvme.DNR
	cases := []struct {
		name       string
		qid        uint16
		sqsize     uint16
		connectQID uint16
		data       []byte
		status     nvme.Status
		result     uint64
	}{
		{"host NQN not terminated", 0, 31, 0, data(func(b []byte) { copy(b[512:768], bytes.Repeat([]byte{'a'}, 256)) }), invalid, inData(512)},
		{"empty subsystem NQN", 0, 31, 0, data(func(b []byte) { clear(b[256:512]) }), invalid, inData(256)},
		{"unknown subsystem (retryable)", 0, 31, 0, connectData("nqn.2026-11.io.example:none", testHost, 0xffff), nvme.StatusConnectInvalidParam, inData(256)},
		{"host not allowed", 0, 31, 0, connectData(locked.NQN, testHost, 0xffff), nvme.StatusConnectInvalidHost | nvme.DNR, inData(512)},
		{"static controller ID", 0, 31, 0, connectData(testNQN, testHost, 1), invalid, inData(16)},
		{"sqsize 0", 0, 0, 0, data(nil), invalid, nvme.ConnectSQESQSize},
		{"qid differs from the transport's", 0, 31, 2, data(nil), invalid, nvme.ConnectSQEQID},
		{"I/O queue of an unknown controller", 2, 31, 2, connectData(testNQN, testHost, h.cntl+1), invalid, inData(16)},
		{"I/O queue of another host NQN", 2, 31, 2, connectData(testNQN, testHost+"x", h.cntl), invalid, inData(512)},
		{"I/O queue of another host ID", 2, 31, 2, data(func(b []byte) { b[16], b[17] = byte(h.cntl), byte(h.cntl>>8); b[0] = 7 }), invalid, inData(0)},
		{"I/O sqsize above MQES", 2, 200, 2, connectData(testNQN, testHost, h.cntl), invalid, nvme.ConnectSQESQSize},
		{"I/O queue ID above the limit", nvme.MaxIOQueues + 1, 31, nvme.MaxIOQueues + 1, connectData(testNQN, testHost, h.cntl), invalid, nvme.ConnectSQEQID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := NewLoopQueue(tg, p, tc.qid, 256)
			defer q.Close()
			rsp, err := q.Submit(connectCmd(tc.connectQID, tc.sqsize, 0, false), tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if rsp.Status() != tc.status || rsp.Result() != tc.result {
				t.Fatalf("status %v IATTR/IPO %#x, want %v %#x", rsp.Status(), rsp.Result(), tc.status, tc.result)
			}
		})
	}
}

// A 4-byte read of CAP returns the half asked for; 4-byte registers do not
// read as 8, and the reserved sizes are refused.
func TestPropertySizes(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	full := h.getProperty(nvme.RegCAP, true)
	if lo := h.getProperty(nvme.RegCAP, false); lo != full&0xffffffff {
		t.Errorf("CAP low dword %#x, want %#x", lo, full&0xffffffff)
	}
	if hi := h.getProperty(nvme.RegCAPHigh, false); hi != full>>32 || hi == 0 {
		t.Errorf("CAP high dword %#x, want %#x", hi, full>>32)
	}
	bad := nvme.StatusInvalidField | nvme.DNR
	for _, tc := range []struct {
		name  string
		set   bool
		size8 bool
		off   uint32
	}{
		{"8-byte CC", false, true, nvme.RegCC},
		{"8-byte CSTS", false, true, nvme.RegCSTS},
		{"8-byte CAP high half", false, true, nvme.RegCAPHigh},
		{"unknown register", false, false, 0x0c},
		{"set CSTS", true, false, nvme.RegCSTS},
		{"set 8-byte CC", true, true, nvme.RegCC},
	} {
		if _, st := h.propertyStatus(tc.set, tc.size8, tc.off, 0); st != bad {
			t.Errorf("%s: %v, want %v", tc.name, st, bad)
		}
	}
	c := newCmd(0)
	c.SetProperty(false, false, nvme.RegVS, 0)
	c[40] = 2 // reserved size
	if st := h.submit(h.admin, c, nil).Status(); st != bad {
		t.Errorf("reserved property size: %v, want %v", st, bad)
	}
}

// A reset (CC.EN 1→0) ends outstanding AERs, drops the I/O queues and
// puts the features back to their defaults; KATO, from Connect, stays.
func TestResetEndsAERsAndRestoresFeatures(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	if _, st := h.feature(true, nvme.FeatNumQueues, 1|1<<16); st != 0 {
		t.Fatalf("set number of queues: %v", st)
	}
	if _, st := h.feature(true, nvme.FeatKeepAlive, 5000); st != 0 {
		t.Fatalf("set keep alive: %v", st)
	}
	aer := enableAEN(t, h, nvme.OAESNSAttrChanged)
	holdsAERs(t, h.ctrl(), 1)
	h.setProperty(nvme.RegCC, 0)
	rsp := <-aer
	if rsp == nil || rsp.Status() != nvme.StatusInternal|nvme.DNR {
		t.Fatalf("AER after reset: %v, want completed with Internal Error and DNR", rsp)
	}
	if !h.io.Disconnected() {
		t.Fatal("I/O queue still connected after reset")
	}
	h.setProperty(nvme.RegCC, ccEnableNVM)
	if aec, st := h.feature(false, nvme.FeatAsyncEvent, 0); st != 0 || aec != 0 {
		t.Errorf("async event config after reset %#x (%v), want 0", aec, st)
	}
	if nq, st := h.feature(false, nvme.FeatNumQueues, 0); st != 0 || nq != (nvme.MaxIOQueues-1)|(nvme.MaxIOQueues-1)<<16 {
		t.Errorf("number of queues after reset %#x (%v), want the default", nq, st)
	}
	if kato, st := h.feature(false, nvme.FeatKeepAlive, 0); st != 0 || kato != 5000 {
		t.Errorf("KATO after reset %d (%v), want 5000", kato, st)
	}
}

// A namespace-attribute-changed event is reported once until the host
// reads the Changed Namespace List without RAE; the list names each
// namespace once.
func TestNamespaceEventsMaskedUntilLogRead(t *testing.T) {
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	h := connect(t, tg, p, testNQN)
	c := h.ctrl()
	aer := enableAEN(t, h, nvme.OAESNSAttrChanged)
	addNS := func(id uint32) { addNamespace(t, tg, id, newMem(1<<20, 512)) }
	addNS(2)
	if rsp := <-aer; rsp == nil || rsp.Status() != 0 {
		t.Fatalf("first AER: %v", rsp)
	}
	aer2 := h.admin.SubmitAsync(newCmd(nvme.AdminAsyncEvent), nil)
	holdsAERs(t, c, 1)
	// Masked: more changes, including one to namespace 2 again, keep the
	// second AER outstanding and queue nothing.
	addNS(3)
	if err := s.RemoveNamespace(2); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	aers, events := len(c.aers), len(c.events)
	c.mu.Unlock()
	if aers != 1 || events != 0 {
		t.Fatalf("while masked: %d AERs held, %d events queued; want 1 and 0", aers, events)
	}
	// Read with RAE: the list stays, and so does the mask.
	page := h.changedNSLog(true)
	if le32(page, 0) != 2 || le32(page, 4) != 3 || le32(page, 8) != 0 {
		t.Fatalf("changed namespace list %v, want [2 3]", page[:12])
	}
	addNS(4)
	c.mu.Lock()
	aers = len(c.aers)
	c.mu.Unlock()
	if aers != 1 {
		t.Fatal("a read with RAE unmasked the event")
	}
	page = h.changedNSLog(false)
	if le32(page, 0) != 2 || le32(page, 4) != 3 || le32(page, 8) != 4 || le32(page, 12) != 0 {
		t.Fatalf("changed namespace list %v, want [2 3 4]", page[:16])
	}
	if page = h.changedNSLog(false); le32(page, 0) != 0 {
		t.Fatalf("list not cleared by a read without RAE: %v", page[:8])
	}
	addNS(5) // unmasked: reported
	if rsp := <-aer2; rsp == nil || rsp.Status() != 0 || rsp.Result() != nvme.AsyncTypeNotice|uint64(nvme.LogChangedNS)<<16 {
		t.Fatalf("AER after the log was read: %v", rsp)
	}
}

func (h *host) changedNSLog(rae bool) []byte {
	h.t.Helper()
	c := keyed(newCmd(nvme.AdminGetLogPage), nvme.ChangedNSLogSize)
	cdw10 := uint32(nvme.LogChangedNS) | uint32(nvme.ChangedNSLogSize/4-1)<<16
	if rae {
		cdw10 |= 1 << 15
	}
	c.SetCDW(10, cdw10)
	b := make([]byte, nvme.ChangedNSLogSize)
	if st := h.submit(h.admin, c, b).Status(); st != 0 {
		h.t.Fatalf("changed namespace log: %v", st)
	}
	return b
}

// Past 1024 changed namespaces the list overflows: its first entry is
// FFFFFFFFh and the rest zero.
func TestChangedNamespaceListOverflow(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	c := h.ctrl()
	for id := uint32(1); id <= nvme.ChangedNSMax; id++ {
		c.namespaceChanged(id)
		c.namespaceChanged(id) // once in the list
	}
	page := h.changedNSLog(true)
	if le32(page, 0) != 1 || le32(page, 4*(nvme.ChangedNSMax-1)) != nvme.ChangedNSMax {
		t.Fatalf("full list: first %d last %d", le32(page, 0), le32(page, 4*(nvme.ChangedNSMax-1)))
	}
	c.namespaceChanged(nvme.ChangedNSMax + 1)
	page = h.changedNSLog(false)
	if le32(page, 0) != nvme.ChangedNSOverflow || !bytes.Equal(page[4:], make([]byte, len(page)-4)) {
		t.Fatalf("overflowed list starts %#x, want FFFFFFFFh then zeros", le32(page, 0))
	}
	c.namespaceChanged(7)
	if page = h.changedNSLog(false); le32(page, 0) != 7 || le32(page, 4) != 0 {
		t.Fatalf("list after the overflow was read: %v", page[:8])
	}
}

// The keep alive timer is never armed again once the controller is gone,
// and a timer that fires after Keep Alive replaced it does nothing.
func TestKeepAliveTimerAfterTeardown(t *testing.T) {
	tg, p, _ := testTarget(t)
	clk := &recordingClock{}
	tg.SetClock(clk)
	h := adminOnly(t, tg, p, testNQN, 5000)
	c := h.ctrl()
	h.setProperty(nvme.RegCC, ccEnableNVM)
	first, armed := clk.last(), clk.Armed()
	if st := h.submit(h.admin, newCmd(nvme.AdminKeepAlive), nil).Status(); st != 0 {
		t.Fatalf("keep alive: %v", st)
	}
	if clk.Armed() != armed+1 || clk.Pending() != 1 {
		t.Fatalf("keep alive armed %d timers, %d pending; want the timer replaced", clk.Armed()-armed, clk.Pending())
	}
	first() // fired just as it was replaced
	if h.admin.Disconnected() || c.Subsystem.Stats.KeepAliveExpired.Load() != 0 {
		t.Fatal("a replaced keep alive timer tore the controller down")
	}
	h.admin.Close()
	if clk.Pending() != 0 {
		t.Fatal("keep alive timer still running after teardown")
	}
	armed = clk.Armed()
	c.keepAlive()
	c.setKATO(1000)
	if clk.Armed() != armed {
		t.Fatalf("keep alive timer armed %d more times after teardown", clk.Armed()-armed)
	}
	clk.last()()
	if got := c.Subsystem.Stats.KeepAliveExpired.Load(); got != 0 {
		t.Fatalf("%d keep alive expiries counted for a controller already gone", got)
	}
}

// A fatal status raised while the host writes CC is never lost: every
// CSTS transition happens under the controller's lock.
func TestCSTSTransitionsDoNotRace(t *testing.T) {
	tg, p, _ := testTarget(t)
	for i := range 200 {
		h := adminOnly(t, tg, p, testNQN, 0)
		c := h.ctrl()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); c.setCC(ccEnableNVM) }()
		go func() { defer wg.Done(); c.fatal("test") }()
		wg.Wait()
		if c.csts.Load()&nvme.CSTSFatal == 0 {
			t.Fatalf("round %d: CSTS %#x lost CFS", i, c.csts.Load())
		}
		h.admin.Close()
	}
}

// flushGate is a backend whose Flush records the call and blocks until
// released.
type flushGate struct {
	*memBackend
	entered chan struct{}
	release chan struct{}
}

func (f *flushGate) Flush() error {
	f.entered <- struct{}{}
	<-f.release
	return f.memBackend.Flush()
}

func (m *memBackend) flushCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flushes
}

// A shutdown notification reports "processing" until every namespace is
// flushed, then "complete".
// trackBackground makes tg's background work waitable: Wait on the
// group returns once all of it finished.
func trackBackground(tg *Target) *sync.WaitGroup {
	var wg sync.WaitGroup
	tg.background = func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	return &wg
}

func TestShutdownFlushesBeforeComplete(t *testing.T) {
	tg, p, mem := testTarget(t)
	bg := trackBackground(tg)
	fg := &flushGate{memBackend: newMem(1<<20, 512), entered: make(chan struct{}, 1), release: make(chan struct{})}
	addNamespace(t, tg, 2, fg)
	h := connect(t, tg, p, testNQN)
	h.setProperty(nvme.RegCC, ccEnableNVM|1<<nvme.CCShnShift)
	<-fg.entered
	if csts := h.getProperty(nvme.RegCSTS, false); csts&nvme.CSTSShstMask != nvme.CSTSShstProcessing {
		t.Fatalf("CSTS %#x while the flush runs, want SHST processing", csts)
	}
	// The admin queue keeps answering meanwhile: the flush is off the poller.
	if _, st := h.identify(nvme.CNSController, 0); st != 0 {
		t.Fatalf("identify during shutdown: %v", st)
	}
	close(fg.release)
	bg.Wait()
	if csts := h.getProperty(nvme.RegCSTS, false); csts&nvme.CSTSShstMask != nvme.CSTSShstComplete {
		t.Fatalf("CSTS %#x once the flush returned, want SHST complete", csts)
	}
	if a, b := mem.flushCount(), fg.flushCount(); a != 1 || b != 1 {
		t.Fatalf("flushes: namespace 1 %d, namespace 2 %d; want one each", a, b)
	}
}

// NN covers exactly the namespace IDs a subsystem may have.
func TestNumberOfNamespaces(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	id, st := h.identify(nvme.CNSController, 0)
	if st != 0 || le32(id, 516) != nvme.MaxNamespaces {
		t.Fatalf("NN %d (%v), want %d", le32(id, 516), st, nvme.MaxNamespaces)
	}
	if _, err := NewNamespace(nvme.MaxNamespaces, newMem(1<<20, 512), false, [16]byte{}); err != nil {
		t.Fatalf("nsid NN: %v", err)
	}
	if _, err := NewNamespace(nvme.MaxNamespaces+1, newMem(1<<20, 512), false, [16]byte{}); err == nil {
		t.Fatal("nsid above NN accepted")
	}
}

// An I/O command that reaches a queue of a controller just reset (its
// disconnect still on the way) gets Command Sequence Error.
func TestIOAfterReset(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	h.setProperty(nvme.RegCC, 0)
	cmd := newCmd(nvme.IORead)
	cmd.SetNSID(1)
	keyed(cmd, 512)
	r := &Request{Cmd: cmd, Rsp: make(nvme.Completion, nvme.CompletionSize)}
	h.io.mu.Lock()
	ok := h.io.Queue.Prepare(r)
	h.io.mu.Unlock()
	if ok || r.Status() != nvme.StatusCommandSequence|nvme.DNR {
		t.Fatalf("read after reset: prepared %v status %v, want Command Sequence Error", ok, r.Status())
	}
}

// closeGate is a flushGate that records whether a flush ran on a closed
// backend.
type closeGate struct {
	flushGate
	closed      atomic.Bool
	flushClosed atomic.Bool
	flushed     chan struct{}
	once        sync.Once
}

func (g *closeGate) Flush() error {
	err := g.flushGate.Flush()
	if g.closed.Load() {
		g.flushClosed.Store(true)
	}
	g.once.Do(func() { close(g.flushed) }) // Close flushes again
	return err
}

func (g *closeGate) Close() error { g.closed.Store(true); return nil }

// Closing the target waits for a shutdown flush still running instead of
// closing the backend under it.
func TestCloseWaitsForShutdownFlush(t *testing.T) {
	tg, p, _ := testTarget(t)
	g := &closeGate{flushGate: flushGate{memBackend: newMem(1<<20, 512), entered: make(chan struct{}, 1), release: make(chan struct{})}, flushed: make(chan struct{})}
	addNamespace(t, tg, 2, g)
	h := connect(t, tg, p, testNQN)
	h.setProperty(nvme.RegCC, ccEnableNVM|1<<nvme.CCShnShift)
	<-g.entered
	closed := make(chan struct{})
	go func() { tg.Close(); close(closed) }()
	// Close disconnects the host before it closes namespaces; it must not
	// return while the flush holds namespace 2.
	<-h.admin.gone
	select {
	case <-closed:
		t.Fatal("Close returned while the shutdown flush still ran")
	default:
	}
	close(g.release)
	<-closed
	<-g.flushed
	if g.flushClosed.Load() || !g.closed.Load() {
		t.Fatalf("flush ran on a closed backend: %v; backend closed: %v", g.flushClosed.Load(), g.closed.Load())
	}
}

// Commands other than Keep Alive also prove the host alive, as the Linux
// target counts them: a slow host connecting its I/O queues before its
// first Keep Alive keeps its controller.
func TestKeepAliveCountsTraffic(t *testing.T) {
	tg, p, _ := testTarget(t)
	clk := &ManualClock{}
	tg.SetClock(clk)
	h := adminOnly(t, tg, p, testNQN, 5000)
	h.setProperty(nvme.RegCC, ccEnableNVM)
	period := 5*time.Second + keepAliveSlack
	clk.Advance(period) // the period of the CC write
	h.identify(nvme.CNSController, 0)
	clk.Advance(period)
	if h.admin.Disconnected() {
		t.Fatal("controller torn down although a command came in during the period")
	}
	clk.Advance(period) // a period without any command
	if !h.admin.Disconnected() {
		t.Fatal("controller kept through a period without any command")
	}
}

// A discovery controller whose host asked for no keep alive goes after
// discoveryKATO and the slack, not a moment before.
func TestDiscoveryKeepAliveDefault(t *testing.T) {
	tg, p, _ := testTarget(t)
	clk := &ManualClock{}
	tg.SetClock(clk)
	h := adminOnly(t, tg, p, nvme.DiscoveryNQN, 0)
	clk.Advance(discoveryKATO*time.Millisecond + keepAliveSlack - time.Millisecond)
	if h.admin.Disconnected() {
		t.Fatal("discovery controller gone before its keep alive timeout")
	}
	clk.Advance(time.Millisecond)
	if !h.admin.Disconnected() {
		t.Fatal("discovery controller kept past its keep alive timeout")
	}
}
