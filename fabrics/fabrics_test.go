package fabrics

import (
	"bytes"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

func TestConnectIdentifyReadWrite(t *testing.T) {
	tg, p, mem := testTarget(t)
	h := connect(t, tg, p, testNQN)

	id, st := h.identify(nvme.CNSController, 0)
	if st != 0 {
		t.Fatalf("identify controller: %v", st)
	}
	if got := trimNUL(id[768:1024]); got != testNQN {
		t.Errorf("SUBNQN %q, want %q", got, testNQN)
	}
	if got := le16(id, 78); got != h.cntl {
		t.Errorf("CNTLID %d, want %d", got, h.cntl)
	}
	if sgls := le32(id, 536); sgls&(nvme.SGLSKeyed|nvme.SGLSOffset) != nvme.SGLSKeyed|nvme.SGLSOffset {
		t.Errorf("SGLS %#x lacks keyed or offset support", sgls)
	}
	if ioccsz := le32(id, 1792); ioccsz*16-64 != 8192 {
		t.Errorf("IOCCSZ %d, want inline 8192", ioccsz)
	}

	ns, st := h.identify(nvme.CNSNamespace, 1)
	if st != 0 {
		t.Fatalf("identify namespace: %v", st)
	}
	if nsze := le32(ns, 0); nsze != 2048 {
		t.Errorf("NSZE %d, want 2048 blocks", nsze)
	}
	list, st := h.identify(nvme.CNSActiveNSList, 0)
	if st != 0 || le32(list, 0) != 1 || le32(list, 4) != 0 {
		t.Errorf("active namespace list %v status %v, want [1]", list[:8], st)
	}
	desc, st := h.identify(nvme.CNSNSDescList, 1)
	if st != 0 || desc[0] != nvme.NIDTUUID || desc[1] != 16 || desc[4] != 1 {
		t.Errorf("namespace descriptors %v status %v", desc[:24], st)
	}

	// Keyed write, in-capsule write, keyed read back.
	data := bytes.Repeat([]byte{0xab}, 8192)
	if st := h.rw(nvme.IOWrite, 1, 8, 16, data, false); st != 0 {
		t.Fatalf("write: %v", st)
	}
	small := bytes.Repeat([]byte{0xcd}, 512)
	if st := h.rw(nvme.IOWrite, 1, 100, 1, small, true); st != 0 {
		t.Fatalf("inline write: %v", st)
	}
	if !bytes.Equal(mem.data[8*512:24*512], data) || !bytes.Equal(mem.data[100*512:101*512], small) {
		t.Fatal("backend does not hold what was written")
	}
	got := make([]byte, 8192)
	if st := h.rw(nvme.IORead, 1, 8, 16, got, false); st != 0 {
		t.Fatalf("read: %v", st)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("read back differs")
	}
	flush := flushCmd(1)
	if st := h.submit(h.io, flush, nil).Status(); st != 0 || mem.flushes != 1 {
		t.Fatalf("flush: status %v, %d backend flushes", st, mem.flushes)
	}
}

func TestIOErrors(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	buf := make([]byte, 4096)
	cases := []struct {
		name string
		op   uint8
		nsid uint32
		slba uint64
		nlb  int
		want nvme.Status
	}{
		{"lba out of range", nvme.IORead, 1, 2047, 8, nvme.StatusLBARange | nvme.DNR},
		{"invalid namespace", nvme.IORead, 7, 0, 8, nvme.StatusInvalidNamespace | nvme.DNR},
		{"nsid 0", nvme.IOWrite, 0, 0, 8, nvme.StatusInvalidNamespace | nvme.DNR},
		{"unknown opcode", 0x7e, 1, 0, 8, nvme.StatusInvalidOpcode | nvme.DNR},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if st := h.rw(tc.op, tc.nsid, tc.slba, tc.nlb, buf, false); st != tc.want {
				t.Fatalf("status %v, want %v", st, tc.want)
			}
		})
	}
	// The queue survives all of them.
	if st := h.rw(nvme.IORead, 1, 0, 8, buf, false); st != 0 {
		t.Fatalf("read after errors: %v", st)
	}
	// Keyed SGL shorter than the transfer.
	c := newCmd(nvme.IORead)
	c.SetNSID(1)
	c.SetCDW(12, 7)
	keyed(c, 512)
	if st := h.submit(h.io, c, buf).Status(); st != nvme.StatusSGLInvalidData|nvme.DNR {
		t.Fatalf("short SGL: %v", st)
	}
	// In-capsule data whose descriptor is longer than the transfer: SGLS
	// offers no SGL longer than the transfer.
	c = newCmd(nvme.IOWrite)
	c.SetNSID(1)
	c.SetCDW(12, 0) // one block
	c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, 1024)
	if st := h.submit(h.io, c, make([]byte, 1024)).Status(); st != nvme.StatusSGLInvalidData|nvme.DNR {
		t.Fatalf("in-capsule SGL longer than the transfer: %v", st)
	}
	// Unsupported SGL descriptor type.
	c = newCmd(nvme.IORead)
	c.SetNSID(1)
	c.SGL()[15] = 0x20
	if st := h.submit(h.io, c, buf).Status(); st != nvme.StatusSGLInvalidType|nvme.DNR {
		t.Fatalf("bad SGL type: %v", st)
	}
}

func TestConnectErrors(t *testing.T) {
	tg, p, _ := testTarget(t)
	t.Run("unknown subsystem", func(t *testing.T) {
		q := NewLoopQueue(tg, p, 0, 32)
		defer q.Close()
		rsp, err := q.Submit(connectCmd(0, 31, 0, false), connectData("nqn.2026-11.io.example:none", testHost, 0xffff))
		// Retryable: the subsystem may be added back while a host reconnects.
		if err != nil || rsp.Status() != nvme.StatusConnectInvalidParam {
			t.Fatalf("status %v err %v", rsp.Status(), err)
		}
		if n := tg.Refused.Counts()[RefusedKey{"unknown_subsystem", p.ID}]; n != 1 {
			t.Fatalf("refused connects to unknown subsystems: %d, want 1", n)
		}
	})
	t.Run("io queue before admin", func(t *testing.T) {
		q := NewLoopQueue(tg, p, 1, 128)
		defer q.Close()
		rsp, err := q.Submit(connectCmd(1, 127, 0, true), connectData(testNQN, testHost, 5))
		if err != nil || rsp.Status() != nvme.StatusConnectInvalidParam|nvme.DNR {
			t.Fatalf("status %v err %v", rsp.Status(), err)
		}
	})
	t.Run("command before connect", func(t *testing.T) {
		q := NewLoopQueue(tg, p, 0, 32)
		defer q.Close()
		rsp, err := q.Submit(keyed(newCmd(nvme.AdminIdentify), 4096), make([]byte, 4096))
		if err != nil || rsp.Status() != nvme.StatusCommandSequence|nvme.DNR {
			t.Fatalf("status %v err %v", rsp.Status(), err)
		}
	})
	t.Run("host not allowed", func(t *testing.T) {
		s := NewSubsystem("nqn.2026-11.io.example:locked", "", "", false)
		s.AllowHost("nqn.2026-11.io.example:other-host")
		if err := tg.AddSubsystem(s); err != nil {
			t.Fatal(err)
		}
		q := NewLoopQueue(tg, p, 0, 32)
		defer q.Close()
		rsp, err := q.Submit(connectCmd(0, 31, 0, false), connectData(s.NQN, testHost, 0xffff))
		if err != nil || rsp.Status() != nvme.StatusConnectInvalidHost|nvme.DNR {
			t.Fatalf("status %v err %v", rsp.Status(), err)
		}
	})
	t.Run("io queue twice", func(t *testing.T) {
		h := connect(t, tg, p, testNQN)
		q := NewLoopQueue(tg, p, 1, 128)
		defer q.Close()
		rsp, err := q.Submit(connectCmd(1, 127, 0, true), connectData(testNQN, testHost, h.cntl))
		if err != nil || rsp.Status() != nvme.StatusCommandSequence|nvme.DNR {
			t.Fatalf("status %v err %v", rsp.Status(), err)
		}
	})
}

func TestDiscoveryLog(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, nvme.DiscoveryNQN)
	id, st := h.identify(nvme.CNSController, 0)
	if st != 0 || id[111] != nvme.ControllerDiscovery {
		t.Fatalf("identify: status %v cntrltype %d", st, id[111])
	}
	hdr, st := h.getLog(nvme.LogDiscovery, 16, 0)
	if st != 0 {
		t.Fatalf("log header: %v", st)
	}
	numrec := le32(hdr, 8)
	if numrec != 2 {
		t.Fatalf("numrec %d, want 2 (discovery + vol1)", numrec)
	}
	// Read the second record alone, by offset, as libnvme does.
	ent, st := h.getLog(nvme.LogDiscovery, 1024, 2048)
	if st != 0 {
		t.Fatalf("log entry: %v", st)
	}
	if ent[0] != nvme.TransportRDMA || ent[2] != nvme.SubtypeNVM || trimNUL(ent[256:512]) != testNQN ||
		trimNUL(ent[512:768]) != "10.0.0.1" || trimNUL(ent[32:64]) != "4420" {
		t.Fatalf("entry: trtype %d subtype %d subnqn %q traddr %q trsvcid %q",
			ent[0], ent[2], trimNUL(ent[256:512]), trimNUL(ent[512:768]), trimNUL(ent[32:64]))
	}
	if _, st := h.getLog(nvme.LogDiscovery, 1024, 1<<20); st != nvme.StatusInvalidField|nvme.DNR {
		t.Fatalf("offset past the end: %v", st)
	}
}

func TestAsyncEventNamespaceAdded(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	aec := newCmd(nvme.AdminSetFeatures)
	aec.SetCDW(10, nvme.FeatAsyncEvent)
	aec.SetCDW(11, nvme.OAESNSAttrChanged)
	if st := h.submit(h.admin, aec, nil).Status(); st != 0 {
		t.Fatalf("set async event config: %v", st)
	}
	aer := newCmd(nvme.AdminAsyncEvent)
	aer.SetCID(900)
	ch := h.admin.SubmitAsync(aer, nil)
	addNamespace(t, tg, 2, newMem(1<<20, 4096))
	rsp := <-ch
	if rsp == nil || rsp.Status() != 0 || rsp.Result() != nvme.AsyncTypeNotice|uint64(nvme.LogChangedNS)<<16 {
		t.Fatalf("AER completion %v", rsp)
	}
	page, st := h.getLog(nvme.LogChangedNS, 4096, 0)
	if st != 0 || le32(page, 0) != 2 {
		t.Fatalf("changed namespace log: status %v first %d", st, le32(page, 0))
	}
}
