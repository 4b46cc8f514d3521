package tcp

import (
	"bytes"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// expectTerm reads the target's answer to a fatal error: a C2HTermReq
// with fes and fei, then the end of the connection.
func expectTerm(t *testing.T, h *testHost, fes uint16, fei uint32) {
	t.Helper()
	hh, err := h.readPDU(nil)
	if err != nil {
		t.Fatalf("want C2HTermReq FES %#x, got error %v", fes, err)
	}
	if hh.Type() != TypeC2HTermReq || hh.FES() != fes || hh.FEI() != fei {
		t.Fatalf("PDU type %#x FES %#x FEI %d, want C2HTermReq FES %#x FEI %d", hh.Type(), hh.FES(), hh.FEI(), fes, fei)
	}
	if hh.PLen() < TermReqHdrSize || hh.PLen() > TermReqHdrSize+MaxTermReqData {
		t.Fatalf("C2HTermReq PLEN %d", hh.PLen())
	}
	expectClosed(t, h)
}

// expectClosed reads until the target closes the connection; it must
// send nothing more.
func expectClosed(t *testing.T, h *testHost) {
	t.Helper()
	h.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var b [1]byte
	// A reset is a close too: the host's bytes that the target never
	// read may reach it after it closed.
	if n, err := h.c.Read(b[:]); n != 0 || !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after the fatal error: read %d bytes, error %v; want the connection closed", n, err)
	}
}

// startWrite sends a write of n bytes on R2T and reads the R2T.
func startWrite(t *testing.T, h *testHost, n int) Header {
	t.Helper()
	rwCmd(h.cmd[:], nvme.IOWrite, 0, n, false)
	h.cid++
	nvme.Command(h.cmd[:]).SetCID(h.cid)
	h.sendCapsule(h.cmd[:], nil)
	r2t, err := h.readPDU(nil)
	if err != nil || r2t.Type() != TypeR2T || r2t.Length() != uint32(n) || r2t.Offset() != 0 {
		t.Fatalf("R2T %x, error %v", []byte(r2t), err)
	}
	return r2t
}

// malformedPeer is a host that breaks the protocol: run connects it to l
// and checks that the target ends its connection as the spec says.
type malformedPeer struct {
	name string
	run  func(t *testing.T, l *Listener)
}

var malformedPeers = []malformedPeer{
	{"bad PFV", func(t *testing.T, l *Listener) {
		h := pair(t, l)
		var b [ICReqSize]byte
		PutICReq(b[:], 1, 0, 0, 0)
		h.send(b[:])
		expectTerm(t, h, FESUnsupportedParam, FieldPFV)
	}},
	{"HPDA out of range", func(t *testing.T, l *Listener) {
		h := pair(t, l)
		var b [ICReqSize]byte
		PutICReq(b[:], 0, MaxHPDA+1, 0, 0)
		h.send(b[:])
		expectTerm(t, h, FESInvalidHeader, FieldHPDA)
	}},
	{"capsule before ICReq", func(t *testing.T, l *Listener) {
		h := pair(t, l)
		h.sendCapsule(newCmd(nvme.OpFabrics), nil)
		expectTerm(t, h, FESSequence, 0)
	}},
	{"oversized PDU length", func(t *testing.T, l *Listener) {
		h := ioHost(t, l, false, false)
		var b [CapsuleCmdHLen]byte
		PutCommon(b[:], TypeCapsuleCmd, 0, CapsuleCmdHLen, CapsuleCmdHLen, 1<<30)
		h.send(b[:])
		expectTerm(t, h, FESDataLimitExceeded, 0)
	}},
	{"H2CData without an R2T", func(t *testing.T, l *Listener) {
		h := ioHost(t, l, false, false)
		h.sendH2C(77, 3, 0, make([]byte, 512), true)
		expectTerm(t, h, FESSequence, 0)
	}},
	{"H2CData for a transfer tag beyond the queue", func(t *testing.T, l *Listener) {
		h := ioHost(t, l, false, false)
		h.sendH2C(77, 4000, 0, make([]byte, 512), true)
		expectTerm(t, h, FESInvalidHeader, FieldTTag)
	}},
	{"data offset outside the transfer", func(t *testing.T, l *Listener) {
		h := ioHost(t, l, false, false)
		r2t := startWrite(t, h, 8192)
		h.sendH2C(r2t.CID(), r2t.TTag(), 8192, make([]byte, 512), true)
		expectTerm(t, h, FESDataOutOfRange, 0)
	}},
	{"data past the end of the transfer", func(t *testing.T, l *Listener) {
		h := ioHost(t, l, false, false)
		r2t := startWrite(t, h, 8192)
		h.sendH2C(r2t.CID(), r2t.TTag(), 4096, make([]byte, 8192), true)
		expectTerm(t, h, FESDataOutOfRange, 0)
	}},
	{"H2CData of no data", func(t *testing.T, l *Listener) {
		// With a data digest, PLEN covers more than the header:
		// the common header's checks find nothing wrong.
		h := ioHost(t, l, false, true)
		r2t := startWrite(t, h, 8192)
		h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		h.sendH2C(r2t.CID(), r2t.TTag(), 0, nil, false)
		expectTerm(t, h, FESInvalidHeader, dataLength)
	}},
	{"LAST_PDU before the end of the R2T", func(t *testing.T, l *Listener) {
		h := ioHost(t, l, false, false)
		r2t := startWrite(t, h, 8192)
		h.sendH2C(r2t.CID(), r2t.TTag(), 0, make([]byte, 4096), true)
		expectTerm(t, h, FESInvalidHeader, FieldFlags)
	}},
	{"no LAST_PDU at the end of the R2T", func(t *testing.T, l *Listener) {
		h := ioHost(t, l, false, false)
		r2t := startWrite(t, h, 8192)
		h.sendH2C(r2t.CID(), r2t.TTag(), 0, make([]byte, 4096), false)
		h.sendH2C(r2t.CID(), r2t.TTag(), 4096, make([]byte, 4096), false)
		expectTerm(t, h, FESInvalidHeader, FieldFlags)
	}},
	{"header digest error", func(t *testing.T, l *Listener) {
		h := ioHost(t, l, true, false)
		rwCmd(h.cmd[:], nvme.IORead, 0, 512, false)
		PutCommon(h.out[:], TypeCapsuleCmd, FlagHDGST, CapsuleCmdHLen, 0, CapsuleCmdHLen+DigestSize)
		copy(h.out[CommonHeaderSize:], h.cmd[:])
		PutDigest(h.out[CapsuleCmdHLen:], Digest(h.out[:CapsuleCmdHLen])^1)
		h.send(h.out[:])
		expectTerm(t, h, FESHeaderDigest, 0)
	}},
	{"H2CTermReq mid-transfer", func(t *testing.T, l *Listener) {
		h := ioHost(t, l, false, false)
		r2t := startWrite(t, h, 64<<10)
		h.sendH2C(r2t.CID(), r2t.TTag(), 0, make([]byte, 4096), false)
		var b [TermReqHdrSize]byte
		PutTermReq(b[:], TypeH2CTermReq, FESDataOutOfRange, 0, 0)
		h.send(b[:])
		expectClosed(t, h) // a TermReq is never answered
	}},
	{"TLS handshake", func(t *testing.T, l *Listener) {
		h := pair(t, l)
		h.send([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03})
		expectClosed(t, h)
	}},
}

// Each malformed peer gets the C2HTermReq the specification gives its
// error, and the connection closes; another host's connection meanwhile
// keeps working, and every buffer goes back to the pool.
func TestMalformedPeers(t *testing.T) {
	for _, c := range malformedPeers {
		t.Run(c.name, func(t *testing.T) {
			tg, p, _ := testTarget(t)
			l := testListener(t, tg, p)
			good := ioHost(t, l, false, false)
			data := bytes.Repeat([]byte{0x5a}, 8192)
			if st := good.write(100, data, false); st != 0 {
				t.Fatalf("write before: %v", st)
			}
			c.run(t, l)
			got := make([]byte, len(data))
			if st := good.read(100, got); st != 0 || !bytes.Equal(got, data) {
				t.Fatalf("the other host's read after: status %v, data equal %v", st, bytes.Equal(got, data))
			}
			// The bad connection's teardown gave its buffers back.
			waitLent(t, l.srv.pool, 0)
		})
	}
}

// waitLent waits until the pool has n bytes lent: teardown runs on the
// connection's poller, after the host saw the close.
func waitLent(t *testing.T, p *Pool, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Lent() != n {
		if time.Now().After(deadline) {
			t.Fatalf("pool lends %d bytes, want %d", p.Lent(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A data digest error fails only its command, with Transient Transport
// Error (the host retries it); the connection goes on.
func TestDataDigestErrorFailsTheCommand(t *testing.T) {
	tg, p, _ := testTarget(t)
	l := testListener(t, tg, p)
	h := ioHost(t, l, false, true)
	before := l.srv.stats.DataDigestErrors.Load()
	for _, inline := range []bool{true, false} {
		data := bytes.Repeat([]byte{0x33}, 4096)
		rwCmd(h.cmd[:], nvme.IOWrite, 0, len(data), inline)
		h.cid++
		nvme.Command(h.cmd[:]).SetCID(h.cid)
		if inline {
			PutCommon(h.out[:], TypeCapsuleCmd, FlagDDGST, CapsuleCmdHLen, CapsuleCmdHLen, uint32(CapsuleCmdHLen+len(data)+DigestSize))
			copy(h.out[CommonHeaderSize:], h.cmd[:])
			h.send(h.out[:CapsuleCmdHLen])
			h.send(data)
		} else {
			h.sendCapsule(h.cmd[:], nil)
			r2t, err := h.readPDU(nil)
			if err != nil || r2t.Type() != TypeR2T {
				t.Fatalf("R2T: %v", err)
			}
			PutCommon(h.h2c[:], TypeH2CData, FlagDDGST|FlagDataLast, DataHdrSize, DataHdrSize, uint32(DataHdrSize+len(data)+DigestSize))
			PutData(h.h2c[:], h.cid, r2t.TTag(), 0, uint32(len(data)))
			h.send(h.h2c[:DataHdrSize])
			h.send(data)
		}
		PutDigest(h.dig[:], Digest(data)+1)
		h.send(h.dig[:])
		rsp, err := h.readPDU(nil)
		if err != nil || rsp.Type() != TypeCapsuleRsp {
			t.Fatalf("in-capsule %v: want a response, got %v", inline, err)
		}
		if st := nvme.Completion(rsp.Response()).Status(); st&^nvme.DNR != nvme.StatusTransientTransport || st&nvme.DNR != 0 {
			t.Fatalf("in-capsule %v: status %v, want Transient Transport Error without DNR", inline, st)
		}
		if st := h.write(0, data, inline); st != 0 {
			t.Fatalf("in-capsule %v: the write retried: %v", inline, st)
		}
	}
	if n := l.srv.stats.DataDigestErrors.Load() - before; n != 2 {
		t.Fatalf("%d data digest errors counted, want 2", n)
	}
}

// A peer that connects and sends nothing, or half a PDU, is closed after
// the connect deadline, and counted.
func TestConnectDeadline(t *testing.T) {
	old := connectTimeout
	connectTimeout = 100 * time.Millisecond
	t.Cleanup(func() { connectTimeout = old })
	tg, p, _ := testTarget(t)
	l := testListener(t, tg, p)
	before := l.srv.stats.ConnectTimeouts.Load()
	silent := pair(t, l)
	half := pair(t, l)
	half.send([]byte{TypeICReq, 0, ICReqSize, 0})
	expectClosed(t, silent)
	expectClosed(t, half)
	if n := l.srv.stats.ConnectTimeouts.Load() - before; n != 2 {
		t.Fatalf("%d connect timeouts counted, want 2", n)
	}
	waitReleased(t, l)
	if reserved, _ := tg.QueuePairs(); reserved != 0 {
		t.Fatalf("%d queue pair places still reserved", reserved)
	}
}

func waitReleased(t *testing.T, l *Listener) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.QueuePairs() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open", l.QueuePairs())
		}
		time.Sleep(time.Millisecond)
	}
}

// In-capsule data longer than the command's transfer, whether the
// descriptor says so or the capsule carries more than the descriptor,
// fails the command with Data SGL Length Invalid; the connection goes on.
func TestInCapsuleDataLongerThanTheTransfer(t *testing.T) {
	tg, p, _ := testTarget(t)
	l := testListener(t, tg, p)
	h := ioHost(t, l, false, false)
	data := make([]byte, 8192)
	for _, c := range []struct {
		name    string
		sglLen  uint32
		capsule int
	}{{"descriptor longer than the transfer", 8192, 8192}, {"capsule longer than the descriptor", 4096, 8192}} {
		rwCmd(h.cmd[:], nvme.IOWrite, 0, 4096, true)
		nvme.Command(h.cmd[:]).SGL().SetOffset(nvme.SGLDataBlockOffset, 0, c.sglLen)
		if st := h.exec(h.cmd[:], data[:c.capsule], nil, nil).Status(); st != nvme.StatusSGLInvalidData|nvme.DNR {
			t.Errorf("%s: status %v, want Data SGL Length Invalid", c.name, st)
		}
	}
	if st := h.write(0, data[:4096], true); st != 0 {
		t.Fatalf("a write after: %v", st)
	}
}
