package daemon

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// loopHost is a host connected to a daemon's target over the in-memory
// transport: one admin queue, enabled.
type loopHost struct {
	t     *testing.T
	admin *fabrics.LoopQueue
	cntl  uint16
}

const loopHostNQN = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000aa"

func loopCmd(op uint8, n int) nvme.Command {
	c := make(nvme.Command, nvme.CommandSize)
	c.SetOpcode(op)
	c.SetFlags(nvme.PSDTSGLContig)
	c.SGL().SetKeyed(0, uint32(n), 1, false)
	return c
}

// loopConnect creates a controller of subsystem nqn through port id.
func loopConnect(t *testing.T, tg *fabrics.Target, port uint16, nqn string) *loopHost {
	t.Helper()
	p := tg.Port(port)
	if p == nil {
		t.Fatalf("no port %d", port)
	}
	h := &loopHost{t: t, admin: fabrics.NewLoopQueue(tg, p, 0, 32)}
	t.Cleanup(h.admin.Close)
	c := loopCmd(nvme.OpFabrics, nvme.ConnectDataSize)
	c.SetConnect(0, 31, 0)
	data := make([]byte, nvme.ConnectDataSize)
	nvme.ConnectData{HostID: [16]byte{0xaa}, CNTLID: nvme.ControllerIDDynamic, SubNQN: nqn, HostNQN: loopHostNQN}.Encode(data)
	rsp := h.submit(c, data)
	if rsp.Status() != 0 {
		t.Fatalf("connect to %s on port %d: %v", nqn, port, rsp.Status())
	}
	h.cntl = uint16(rsp.Result())
	c = loopCmd(nvme.OpFabrics, 0)
	c.SetProperty(true, false, nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
	if st := h.submit(c, nil).Status(); st != 0 {
		t.Fatalf("enable: %v", st)
	}
	return h
}

func (h *loopHost) submit(c nvme.Command, data []byte) nvme.Completion {
	h.t.Helper()
	rsp, err := h.admin.Submit(c, data)
	if err != nil {
		h.t.Fatalf("opcode %#x: %v", c.Opcode(), err)
	}
	return rsp
}

func (h *loopHost) identify(cns uint8, nsid uint32) []byte {
	h.t.Helper()
	c := loopCmd(nvme.AdminIdentify, nvme.IdentifySize)
	c.SetNSID(nsid)
	c.SetCDW(10, uint32(cns))
	b := make([]byte, nvme.IdentifySize)
	if st := h.submit(c, b).Status(); st != 0 {
		h.t.Fatalf("identify CNS %d nsid %d: %v", cns, nsid, st)
	}
	return b
}

func (h *loopHost) getLog(lid uint8, n int) []byte {
	h.t.Helper()
	c := loopCmd(nvme.AdminGetLogPage, n)
	c.SetCDW(10, uint32(lid)|uint32(n/4-1)<<16)
	b := make([]byte, n)
	if st := h.submit(c, b).Status(); st != 0 {
		h.t.Fatalf("log page %#x: %v", lid, st)
	}
	return b
}

// Identify Controller byte offsets the test reads.
const (
	idCNTLID = 78 // 2 bytes
)

// differences lists the byte ranges where a and b differ.
func differences(a, b []byte) []string {
	var out []string
	for i := 0; i < len(a); {
		if a[i] == b[i] {
			i++
			continue
		}
		j := i
		for j < len(a) && a[j] != b[j] {
			j++
		}
		out = append(out, fmt.Sprintf("bytes %d..%d: % x vs % x", i, j-1, a[i:j], b[i:j]))
		i = j
	}
	return out
}

// haConfig is one of two daemons serving one subsystem: the same
// subsystem section (NQN, derived serial and model, one namespace with a
// derived UUID on a shared file, one with a configured UUID), each on its
// own address with its own controller ID range and ANA states.
func haConfig(dir, addr string, cntlidMin, cntlidMax int, state string) string {
	return fmt.Sprintf(`
control: {socket: %[1]s/ctl-%[2]s.sock}
ports: [{id: 1, address: %[2]s, ana: {1: %[5]s}}]
subsystems:
  - nqn: nqn.2026-11.io.example:ha
    allow_any_host: true
    cntlid_min: %[3]d
    cntlid_max: %[4]d
    namespaces:
      - {nsid: 1, backend: file, path: %[1]s/shared.img, size: 16MiB}
      - {nsid: 7, backend: nullblk, size: 64MiB, uuid: 6a1e7c2e-5d1b-4c55-9a0e-2b8f3f0d9a11}
`, dir, addr, cntlidMin, cntlidMax, state)
}

// Two daemons built from the same subsystem section report the same
// identity, which the Linux host groups paths by: serial, model,
// subsystem NQN, namespace IDs, and each namespace's UUID, NGUID and
// EUI-64; and controller IDs from their own ranges, which the host needs
// to tell the controllers apart.
func TestTwoDaemonsOneIdentity(t *testing.T) {
	useFakeRDMA(t)
	dir := t.TempDir()
	var hosts []*loopHost
	for _, cfg := range []string{
		haConfig(dir, "10.99.0.1", 1, 999, "optimized"),
		haConfig(dir, "10.99.0.2", 1000, 1999, "non_optimized"),
	} {
		d, err := Start(parse(t, cfg), quietLogger())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Stop(time.Second) })
		hosts = append(hosts, loopConnect(t, d.target, 1, "nqn.2026-11.io.example:ha"))
	}
	a, b := hosts[0], hosts[1]
	if a.cntl < 1 || a.cntl > 999 || b.cntl < 1000 || b.cntl > 1999 {
		t.Fatalf("controller IDs %d and %d, want one from 1..999 and one from 1000..1999", a.cntl, b.cntl)
	}

	idA, idB := a.identify(nvme.CNSController, 0), b.identify(nvme.CNSController, 0)
	if got := le16(idA[idCNTLID:]); got != a.cntl {
		t.Fatalf("Identify CNTLID %d, Connect gave %d", got, a.cntl)
	}
	// Everything else in Identify Controller is the same on both.
	clear(idA[idCNTLID : idCNTLID+2])
	clear(idB[idCNTLID : idCNTLID+2])
	if d := differences(idA, idB); len(d) > 0 {
		t.Errorf("Identify Controller differs between the daemons:\n%v", d)
	}

	nsList := a.identify(nvme.CNSActiveNSList, 0)
	if d := differences(nsList, b.identify(nvme.CNSActiveNSList, 0)); len(d) > 0 {
		t.Errorf("active namespace lists differ: %v", d)
	}
	if le32(nsList) != 1 || le32(nsList[4:]) != 7 {
		t.Fatalf("active namespaces %v, want 1 and 7", nsList[:8])
	}
	for _, nsid := range []uint32{1, 7} {
		for _, cns := range []uint8{nvme.CNSNamespace, nvme.CNSNSDescList} {
			pa, pb := a.identify(cns, nsid), b.identify(cns, nsid)
			if d := differences(pa, pb); len(d) > 0 {
				t.Errorf("namespace %d, Identify CNS %d differs between the daemons:\n%v", nsid, cns, d)
			}
		}
	}
	// The configured UUID is the one reported (descriptor: type, length, 2 reserved, value).
	desc := a.identify(nvme.CNSNSDescList, 7)
	want := []byte{0x6a, 0x1e, 0x7c, 0x2e, 0x5d, 0x1b, 0x4c, 0x55, 0x9a, 0x0e, 0x2b, 0x8f, 0x3f, 0x0d, 0x9a, 0x11}
	if desc[0] != nvme.NIDTUUID || !bytes.Equal(desc[4:20], want) {
		t.Fatalf("namespace 7 descriptor list starts % x, want the configured UUID", desc[:20])
	}
}

func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }
func le32(b []byte) uint32 { return uint32(le16(b)) | uint32(le16(b[2:]))<<16 }

// The controller ID range comes from the file at start and follows it on
// reload without rebuilding the subsystem: connected controllers stay,
// new ones get IDs from the new range.
func TestControllerIDRangeFollowsReload(t *testing.T) {
	useFakeRDMA(t)
	dir := t.TempDir()
	d, err := Start(parse(t, haConfig(dir, "10.99.0.2", 1000, 1999, "optimized")), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(time.Second) })
	const nqn = "nqn.2026-11.io.example:ha"
	s := d.target.Subsystem(nqn)
	before := loopConnect(t, d.target, 1, nqn)
	if before.cntl != 1000 {
		t.Fatalf("first controller ID %d, want 1000", before.cntl)
	}
	if err := d.Apply(parse(t, haConfig(dir, "10.99.0.2", 3000, 3999, "optimized"))); err != nil {
		t.Fatal(err)
	}
	if d.target.Subsystem(nqn) != s || before.admin.Disconnected() {
		t.Fatal("a controller ID range change rebuilt the subsystem or dropped its controller")
	}
	if after := loopConnect(t, d.target, 1, nqn); after.cntl != 3000 {
		t.Fatalf("controller ID after the reload %d, want 3000", after.cntl)
	}
}

// withReferrals adds referrals to the port of a haConfig.
func withReferrals(cfg, refs string) string {
	return strings.Replace(cfg, "}}]", "}, referrals: "+refs+"}]", 1)
}

// discoveryRecords reads the discovery log through h, a discovery
// controller.
func (h *loopHost) discoveryRecords() (nvme.DiscoveryHeader, []nvme.DiscoveryEntry) {
	h.t.Helper()
	hdr, err := nvme.ParseDiscoveryHeader(h.getLog(nvme.LogDiscovery, nvme.DiscoveryHdrSize))
	if err != nil {
		h.t.Fatal(err)
	}
	page := h.getLog(nvme.LogDiscovery, nvme.DiscoveryHdrSize+int(hdr.NumRec)*nvme.DiscoveryEntSize)
	var out []nvme.DiscoveryEntry
	for off := nvme.DiscoveryHdrSize; off < len(page); off += nvme.DiscoveryEntSize {
		e, err := nvme.ParseDiscoveryEntry(page[off:])
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, e)
	}
	return hdr, out
}

// awaitEvent enables the notices in bits and leaves an Asynchronous Event
// Request with the controller; the channel yields its completion.
func (h *loopHost) awaitEvent(bits uint32) <-chan nvme.Completion {
	h.t.Helper()
	c := loopCmd(nvme.AdminSetFeatures, 0)
	c.SetCDW(10, nvme.FeatAsyncEvent)
	c.SetCDW(11, bits)
	if st := h.submit(c, nil).Status(); st != 0 {
		h.t.Fatalf("set async event config: %v", st)
	}
	return h.admin.SubmitAsync(loopCmd(nvme.AdminAsyncEvent, 0), nil)
}

// Referrals come from the file at start and change on reload without
// restarting the port's listener; a discovery controller connected through
// the port gets the discovery log change event and reads the new list.
func TestReferralsFollowReload(t *testing.T) {
	rdma := useFakeRDMA(t)
	dir := t.TempDir()
	base := haConfig(dir, "10.99.0.1", 1, 999, "optimized")
	d, err := Start(parse(t, withReferrals(base, "[{address: 10.99.0.2}]")), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(time.Second) })
	h := loopConnect(t, d.target, 1, nvme.DiscoveryNQN)
	hdr, recs := h.discoveryRecords()
	if len(recs) != 3 || recs[2].Subtype != nvme.SubtypeDiscoveryReferral || recs[2].TRADDR != "10.99.0.2" || recs[2].TRSVCID != "4420" {
		t.Fatalf("discovery log at start %+v, want the referral to 10.99.0.2:4420 last", recs)
	}
	// get_state and ctl list show them, and the controller ID range.
	text := ctlList(t, api.StateOf(d))
	// Compared with the columns' padding squeezed.
	listed := strings.Join(strings.Fields(text), " ")
	for _, want := range []string{"referral rdma 10.99.0.2:4420", "all ports, controller IDs 1..999"} {
		if !strings.Contains(listed, want) {
			t.Errorf("ctl list lacks %q:\n%s", want, text)
		}
	}
	events := h.awaitEvent(nvme.OAESDiscoveryChange)
	next := withReferrals(base, "[{address: 10.99.0.2, port: 4421}, {address: 10.99.0.3}]")
	if err := d.Apply(parse(t, next)); err != nil {
		t.Fatal(err)
	}
	if len(rdma.opened) != 1 || rdma.opened[0].closed || h.admin.Disconnected() {
		t.Fatal("a referral change restarted the port or dropped its discovery controller")
	}
	if rsp := <-events; rsp == nil || rsp.Result() != nvme.AsyncTypeNotice|uint64(nvme.AsyncNoticeDiscoveryLog)<<8|uint64(nvme.LogDiscovery)<<16 {
		t.Fatalf("discovery log change event: %v", rsp)
	}
	hdr2, recs := h.discoveryRecords()
	if hdr2.GenCtr == hdr.GenCtr || len(recs) != 4 || recs[2].TRSVCID != "4421" || recs[3].TRADDR != "10.99.0.3" {
		t.Fatalf("after reload: generation %d (was %d), records %+v", hdr2.GenCtr, hdr.GenCtr, recs)
	}
	if err := d.Apply(parse(t, base)); err != nil {
		t.Fatal(err)
	}
	if _, recs := h.discoveryRecords(); len(recs) != 2 {
		t.Fatalf("referrals removed, yet %d records", len(recs))
	}
}

// lockedBuffer is a log destination tests read while the daemon may log.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// take returns what was logged since the last take.
func (b *lockedBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return s
}

// What -check warns about is logged at start and at every reload that
// applies a file with it.
func TestWarningsLogged(t *testing.T) {
	useFakeRDMA(t)
	dir := t.TempDir()
	var logged lockedBuffer
	logger := quietLogger()
	logger.SetOutput(&logged)
	noANA := strings.Replace(haConfig(dir, "10.99.0.2", 1000, 1999, "optimized"), ", ana: {1: optimized}", "", 1)
	const warning = "subsystems[0].cntlid_min: controller IDs 1000..1999 leave room for another daemon"
	d, err := Start(parse(t, noANA), logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(time.Second) })
	if out := logged.take(); !strings.Contains(out, warning) || !strings.Contains(out, "level=warning") {
		t.Fatalf("start log lacks the warning:\n%s", out)
	}
	path := filepath.Join(dir, "config.yaml")
	write := func(cfg string) {
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(haConfig(dir, "10.99.0.2", 1000, 1999, "non_optimized"))
	if err := d.Reload(path); err != nil {
		t.Fatal(err)
	}
	if out := logged.take(); strings.Contains(out, warning) {
		t.Fatalf("warning logged with an ANA state set:\n%s", out)
	}
	write(noANA)
	if err := d.Reload(path); err != nil {
		t.Fatal(err)
	}
	if out := logged.take(); !strings.Contains(out, warning) {
		t.Fatalf("reload log lacks the warning:\n%s", out)
	}
}
