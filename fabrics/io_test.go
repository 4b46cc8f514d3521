package fabrics

import (
	"bytes"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func ioCmd(op uint8, nsid uint32, slba uint64, nlb int, n int) nvme.Command {
	c := newCmd(op)
	c.SetNSID(nsid)
	c.SetSLBA(slba)
	c.SetCDW(12, uint32(nlb-1))
	return keyed(c, n)
}

func TestCompare(t *testing.T) {
	tg, p, mem := testTarget(t)
	h := connect(t, tg, p, testNQN)
	copy(mem.data[512:], bytes.Repeat([]byte{7}, 1024))
	if st := h.rw(nvme.IOCompare, 1, 1, 2, bytes.Repeat([]byte{7}, 1024), false); st != 0 {
		t.Fatalf("matching compare: %v", st)
	}
	if st := h.rw(nvme.IOCompare, 1, 1, 2, bytes.Repeat([]byte{8}, 1024), false); st != nvme.StatusCompareFailed {
		t.Fatalf("mismatching compare: %v", st)
	}
}

// fused submits a Compare (first) and a Write (second) over one range.
func fused(h *host, slba uint64, expect, write []byte) (first, second nvme.Status) {
	nlb := len(expect) / 512
	c := ioCmd(nvme.IOCompare, 1, slba, nlb, len(expect))
	c.SetFlags(c.Flags() | nvme.FuseFirst)
	c.SetCID(1000)
	firstCh := h.io.SubmitAsync(c, expect) // arrives before the second
	w := ioCmd(nvme.IOWrite, 1, slba, nlb, len(write))
	w.SetFlags(w.Flags() | nvme.FuseSecond)
	second = h.submit(h.io, w, write).Status()
	rsp := <-firstCh
	if rsp == nil {
		h.t.Fatal("first fused command never completed")
	}
	return rsp.Status(), second
}

func TestFusedCompareAndWrite(t *testing.T) {
	tg, p, mem := testTarget(t)
	h := connect(t, tg, p, testNQN)
	old := bytes.Repeat([]byte{1}, 512)
	nu := bytes.Repeat([]byte{2}, 512)
	copy(mem.data[4096:], old)

	if f, s := fused(h, 8, old, nu); f != 0 || s != 0 {
		t.Fatalf("matching pair: first %v second %v", f, s)
	}
	if !bytes.Equal(mem.data[4096:4608], nu) {
		t.Fatal("matching pair did not write")
	}
	if f, s := fused(h, 8, old, bytes.Repeat([]byte{3}, 512)); f != nvme.StatusCompareFailed || s != nvme.StatusFusedFail {
		t.Fatalf("mismatching pair: first %v second %v", f, s)
	}
	if !bytes.Equal(mem.data[4096:4608], nu) {
		t.Fatal("mismatching pair wrote")
	}
}

func TestFusedErrors(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	buf := make([]byte, 512)

	// A second without a first.
	w := ioCmd(nvme.IOWrite, 1, 0, 1, 512)
	w.SetFlags(w.Flags() | nvme.FuseSecond)
	if st := h.submit(h.io, w, buf).Status(); st != nvme.StatusFusedMissing|nvme.DNR {
		t.Fatalf("lone second: %v", st)
	}
	// A first followed by an ordinary command: the first fails, the other
	// runs normally.
	c := ioCmd(nvme.IOCompare, 1, 0, 1, 512)
	c.SetFlags(c.Flags() | nvme.FuseFirst)
	firstCh := h.io.SubmitAsync(c, buf) // arrives before the read
	if st := h.rw(nvme.IORead, 1, 0, 1, buf, false); st != 0 {
		t.Fatalf("read after a lone first: %v", st)
	}
	if rsp := <-firstCh; rsp == nil || rsp.Status() != nvme.StatusFusedMissing {
		t.Fatalf("lone first: %v", rsp)
	}
	// Fused on the admin queue, and a fused Read, are invalid.
	a := keyed(newCmd(nvme.AdminIdentify), 4096)
	a.SetFlags(a.Flags() | nvme.FuseFirst)
	if st := h.submit(h.admin, a, make([]byte, 4096)).Status(); st != nvme.StatusInvalidField|nvme.DNR {
		t.Fatalf("fused admin command: %v", st)
	}
	rd := ioCmd(nvme.IORead, 1, 0, 1, 512)
	rd.SetFlags(rd.Flags() | nvme.FuseFirst)
	if st := h.submit(h.io, rd, buf).Status(); st != nvme.StatusInvalidField|nvme.DNR {
		t.Fatalf("fused read: %v", st)
	}
}

func TestHostileNamespaceIDs(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	buf := make([]byte, 4096)
	if st := h.rw(nvme.IORead, 0xffffffff, 0, 1, buf[:512], false); st != nvme.StatusInvalidNamespace|nvme.DNR {
		t.Fatalf("read nsid broadcast: %v", st)
	}
	if _, st := h.identify(nvme.CNSNamespace, 0); st != nvme.StatusInvalidNamespace|nvme.DNR {
		t.Fatalf("identify ns 0: %v", st)
	}
	if _, st := h.identify(nvme.CNSActiveNSList, 0xfffffffe); st != nvme.StatusInvalidNamespace|nvme.DNR {
		t.Fatalf("active list after 0xfffffffe: %v", st)
	}
	if _, st := h.identify(nvme.CNSNSDescList, 9); st != nvme.StatusInvalidNamespace|nvme.DNR {
		t.Fatalf("descriptors of a missing namespace: %v", st)
	}
	// Flush to every namespace is allowed.
	f := flushCmd(0xffffffff)
	if st := h.submit(h.io, f, nil).Status(); st != 0 {
		t.Fatalf("flush all: %v", st)
	}
	// Transfers up to MDTS work; larger ones are refused, in range or not.
	addNamespace(t, tg, 2, newMem(4*MaxDataTransfer, 512))
	if st := h.rw(nvme.IORead, 2, 0, MaxDataTransfer/512, make([]byte, MaxDataTransfer), false); st != 0 {
		t.Fatalf("read of MDTS: %v", st)
	}
	if st := h.rw(nvme.IORead, 2, 0, MaxDataTransfer/512+1, make([]byte, MaxDataTransfer+512), false); st != nvme.StatusInvalidField|nvme.DNR {
		t.Fatalf("read above MDTS: %v", st)
	}
}

func TestWriteZeroesAndDeallocate(t *testing.T) {
	tg, p, mem := testTarget(t)
	h := connect(t, tg, p, testNQN)
	for i := range mem.data[:8192] {
		mem.data[i] = 0xff
	}
	wz := newCmd(nvme.IOWriteZeroes)
	wz.SetNSID(1)
	wz.SetSLBA(0)
	wz.SetCDW(12, 3|1<<25) // 4 blocks, deallocate
	if st := h.submit(h.io, wz, nil).Status(); st != 0 {
		t.Fatalf("write zeroes: %v", st)
	}
	if !bytes.Equal(mem.data[:2048], make([]byte, 2048)) || mem.data[2048] != 0xff {
		t.Fatal("write zeroes touched the wrong range")
	}
	// Dataset Management, deallocate blocks 8..11.
	rng := make([]byte, 16)
	rng[4] = 4 // NLB
	rng[8] = 8 // SLBA
	d := keyed(newCmd(nvme.IODatasetMgmt), 16)
	d.SetNSID(1)
	d.SetCDW(10, 0) // one range
	d.SetCDW(11, 1<<2)
	if st := h.submit(h.io, d, rng).Status(); st != 0 {
		t.Fatalf("dsm: %v", st)
	}
	if !bytes.Equal(mem.data[4096:6144], make([]byte, 2048)) || mem.data[6144] != 0xff {
		t.Fatal("dsm deallocated the wrong range")
	}
	rng[8] = 0xff
	rng[9] = 0xff
	if st := h.submit(h.io, d, rng).Status(); st != nvme.StatusLBARange|nvme.DNR {
		t.Fatalf("dsm out of range: %v", st)
	}
	// The Linux host sends one range in a whole page of in-capsule data
	// (blkdiscard): the descriptor is longer than the ranges, and the
	// rest is ignored.
	copy(mem.data[4096:6144], bytes.Repeat([]byte{0xff}, 2048))
	page := make([]byte, 4096)
	page[4] = 4 // NLB
	page[8] = 8 // SLBA
	page[16+4] = 0xff
	d = newCmd(nvme.IODatasetMgmt)
	d.SetNSID(1)
	d.SetCDW(10, 0) // one range
	d.SetCDW(11, 1<<2)
	d.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, 4096)
	if st := h.submit(h.io, d, page).Status(); st != 0 {
		t.Fatalf("dsm with a page of in-capsule ranges: %v", st)
	}
	if !bytes.Equal(mem.data[4096:6144], make([]byte, 2048)) || mem.data[6144] != 0xff {
		t.Fatal("dsm with a page of in-capsule ranges deallocated the wrong range")
	}
}

func TestSMARTCountsIO(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	buf := make([]byte, 4096)
	for range 3 {
		h.rw(nvme.IOWrite, 1, 0, 8, buf, false)
	}
	h.rw(nvme.IORead, 1, 0, 8, buf, false)
	page, st := h.getLog(nvme.LogSMART, 512, 0)
	if st != 0 {
		t.Fatalf("smart log: %v", st)
	}
	if reads, writes := le32(page, 64), le32(page, 80); reads != 1 || writes != 3 {
		t.Fatalf("host reads %d writes %d, want 1 and 3", reads, writes)
	}
	if units := le32(page, 48); units != 1 {
		t.Fatalf("data units written %d, want 1 (12 KiB rounds up)", units)
	}
}

func TestSMARTSurvivesReconnectAndRestart(t *testing.T) {
	tg, p, _ := testTarget(t)
	tg.SetLifetime(Lifetime{PowerCycles: 7, UnsafeShutdowns: 2, PowerOn: 5 * time.Hour})
	h := connect(t, tg, p, testNQN)
	buf := make([]byte, 4096)
	h.rw(nvme.IOWrite, 1, 0, 8, buf, false)
	h.rw(nvme.IOWrite, 1, 0, 8, buf, false)
	// The host goes away and comes back as a new controller.
	h.io.Close()
	h.admin.Close()
	h = connect(t, tg, p, testNQN)
	h.rw(nvme.IORead, 1, 0, 8, buf, false)
	page, st := h.getLog(nvme.LogSMART, 512, 0)
	if st != 0 {
		t.Fatalf("smart log: %v", st)
	}
	for _, f := range []struct {
		name string
		off  int
		want uint32
	}{
		{"host reads", 64, 1}, {"host writes", 80, 2},
		{"power cycles", 112, 7}, {"power on hours", 128, 5}, {"unsafe shutdowns", 144, 2},
	} {
		if got := le32(page, f.off); got != f.want {
			t.Errorf("%s %d, want %d", f.name, got, f.want)
		}
	}
}
