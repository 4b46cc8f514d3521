package tcp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/targettest"
	"golang.org/x/sys/unix"
)

const (
	testNQN = "nqn.2014-08.org.nvmexpress:tcp-test"
	hostNQN = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001"
)

// testTarget has one TCP port (port 1) with a subsystem whose namespace 1
// is a 4 MiB file of 512-byte blocks.
func testTarget(t testing.TB) (*fabrics.Target, *fabrics.Port, string) {
	t.Helper()
	p := &fabrics.Port{ID: 1, Address: netip.MustParseAddr("127.0.0.1"), ServiceID: 4420, InlineDataSize: 8192, MaxQueueSize: 128}
	tg, path := targettest.FileTarget(t, p, testNQN)
	return tg, p, path
}

// testListener listens on the port; with loopback false it accepts no
// TCP connections of its own and serves socket pairs (pair).
func testListener(t testing.TB, tg *fabrics.Target, p *fabrics.Port) *Listener {
	t.Helper()
	l, err := listenOn(tg, p, netip.AddrPortFrom(p.Address, 0), tg.Log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(5e9) })
	return l
}

// targetListener is testListener on testTarget's port, for the tests that
// need no more of the target than the listener reaches.
func targetListener(t testing.TB) *Listener {
	t.Helper()
	tg, p, _ := testTarget(t)
	return testListener(t, tg, p)
}

// adminHost connects an admin queue over a socket pair.
func adminHost(t testing.TB, l *Listener, hd, dd bool) *testHost {
	t.Helper()
	admin := pair(t, l)
	admin.icreq(hd, dd)
	admin.connectAdmin(testNQN)
	return admin
}

// ioQueue connects an I/O queue of admin's controller over a socket pair.
func ioQueue(t testing.TB, l *Listener, admin *testHost, hd, dd bool) *testHost {
	t.Helper()
	h := pair(t, l)
	h.icreq(hd, dd)
	if st := h.connectIO(testNQN, admin.cntl, true); st != 0 {
		t.Fatalf("I/O connect: %v", st)
	}
	return h
}

// ioHost connects an admin queue and one I/O queue over socket pairs.
func ioHost(t testing.TB, l *Listener, hd, dd bool) *testHost {
	t.Helper()
	return ioQueue(t, l, adminHost(t, l, hd, dd), hd, dd)
}

// pair connects a host to the listener over a socket pair.
func pair(t testing.TB, l *Listener) *testHost {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	place := l.srv.target.ReserveQueue(l.srv.port.ID, netip.Addr{})
	if place == nil {
		t.Fatal("queue pair limit")
	}
	if err := l.serve(fds[0], "socketpair", place); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "host")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return newTestHost(t, nc)
}

// dial connects a host to the listener over loopback TCP.
func dial(t testing.TB, l *Listener) *testHost {
	t.Helper()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return newTestHost(t, nc)
}

// testHost is a minimal NVMe/TCP host. Its I/O path allocates nothing, so
// that benchmarks count the target's allocations only.
type testHost struct {
	t      testing.TB
	c      net.Conn
	hd, dd bool
	maxH2C uint32
	cid    uint16
	cntl   uint16
	hdr    [256]byte
	out    [CapsuleCmdHLen + DigestSize]byte
	dig    [DigestSize]byte
	h2c    [DataHdrSize + DigestSize]byte
	cmd    [nvme.CommandSize]byte
	pad    [256]byte
	err    error // of the first failed write
	rsp    [nvme.CompletionSize]byte
	cattr  uint8 // Connect attributes: nvme.ConnectSQFlowDisable
	// successes counts the commands a C2HData with the SUCCESS flag
	// completed, without a CapsuleResp.
	successes int
}

func newTestHost(t testing.TB, c net.Conn) *testHost { return &testHost{t: t, c: c} }

// icreq initializes the connection.
func (h *testHost) icreq(hd, dd bool) {
	h.t.Helper()
	var digests uint8
	if hd {
		digests |= DigestHeader
	}
	if dd {
		digests |= DigestData
	}
	var b [ICReqSize]byte
	PutICReq(b[:], PFV, 0, digests, 0)
	h.send(b[:])
	if h.err != nil {
		h.t.Fatalf("ICReq: %v", h.err)
	}
	var r [ICRespSize]byte
	if _, err := io.ReadFull(h.c, r[:]); err != nil {
		h.t.Fatalf("ICResp: %v", err)
	}
	rh := Header(r[:])
	if rh.Type() != TypeICResp || rh.PLen() != ICRespSize || rh.DigestBits() != digests || rh.HPDA() != 0 {
		h.t.Fatalf("ICResp %x", r[:16])
	}
	h.hd, h.dd, h.maxH2C = hd, dd, rh.MaxR2T()
}

// send writes b; the first error is kept for exec: a target that found
// a fatal error closes the connection before the rest of a PDU is sent.
func (h *testHost) send(b []byte) {
	if _, err := h.c.Write(b); err != nil && h.err == nil {
		h.err = err
	}
}

func (h *testHost) flags(data bool) uint8 {
	var f uint8
	if h.hd {
		f |= FlagHDGST
	}
	if data && h.dd {
		f |= FlagDDGST
	}
	return f
}

func (h *testHost) hdgst() int {
	if h.hd {
		return DigestSize
	}
	return 0
}

func (h *testHost) ddgst() int {
	if h.dd {
		return DigestSize
	}
	return 0
}

// sendCapsule sends a command, with inline as in-capsule data.
func (h *testHost) sendCapsule(cmd []byte, inline []byte) {
	hd := h.hdgst()
	plen, pdo := uint32(CapsuleCmdHLen+hd), uint8(0)
	if len(inline) > 0 {
		pdo = uint8(plen)
		plen += uint32(len(inline) + h.ddgst())
	}
	PutCommon(h.out[:], TypeCapsuleCmd, h.flags(len(inline) > 0), CapsuleCmdHLen, pdo, plen)
	copy(h.out[CommonHeaderSize:], cmd)
	if h.hd {
		PutDigest(h.out[CapsuleCmdHLen:], Digest(h.out[:CapsuleCmdHLen]))
	}
	h.send(h.out[:CapsuleCmdHLen+hd])
	if len(inline) > 0 {
		h.send(inline)
		if h.dd {
			PutDigest(h.dig[:], Digest(inline))
			h.send(h.dig[:])
		}
	}
}

// sendH2C sends data as one H2CData PDU.
func (h *testHost) sendH2C(cid, ttag uint16, off uint32, data []byte, last bool) {
	hd := h.hdgst()
	f := h.flags(true)
	if last {
		f |= FlagDataLast
	}
	PutCommon(h.h2c[:], TypeH2CData, f, DataHdrSize, uint8(DataHdrSize+hd), uint32(DataHdrSize+hd+len(data)+h.ddgst()))
	PutData(h.h2c[:], cid, ttag, off, uint32(len(data)))
	if h.hd {
		PutDigest(h.h2c[DataHdrSize:], Digest(h.h2c[:DataHdrSize]))
	}
	h.send(h.h2c[:DataHdrSize+hd])
	h.send(data)
	if h.dd {
		PutDigest(h.dig[:], Digest(data))
		h.send(h.dig[:])
	}
}

// readPDU reads one PDU's header; for C2HData it reads the data into
// into at the PDU's offset, for a C2HTermReq its data into h.pad.
func (h *testHost) readPDU(into []byte) (Header, error) {
	if _, err := io.ReadFull(h.c, h.hdr[:CommonHeaderSize]); err != nil {
		return nil, err
	}
	hh := Header(h.hdr[:])
	hlen := int(hh.HLen())
	if hh.Type() == TypeC2HTermReq {
		if _, err := io.ReadFull(h.c, h.hdr[CommonHeaderSize:hh.PLen()]); err != nil {
			return nil, err
		}
		return hh, nil
	}
	hd := h.hdgst()
	if _, err := io.ReadFull(h.c, h.hdr[CommonHeaderSize:hlen+hd]); err != nil {
		return nil, err
	}
	if h.hd && hh.Flags()&FlagHDGST == 0 {
		return nil, errors.New("header digest flag missing")
	}
	if h.hd {
		if err := CheckHeaderDigest(h.hdr[:], hlen); err != nil {
			return nil, err
		}
	}
	if hh.Type() != TypeC2HData {
		return hh, nil
	}
	if pad := int(hh.PDO()) - hlen - hd; pad > 0 {
		if _, err := io.ReadFull(h.c, h.pad[:pad]); err != nil {
			return nil, err
		}
	}
	off, n := hh.Offset(), hh.Length()
	if uint64(off)+uint64(n) > uint64(len(into)) {
		return nil, errors.New("C2HData beyond the host buffer")
	}
	if _, err := io.ReadFull(h.c, into[off:off+n]); err != nil {
		return nil, err
	}
	if h.dd {
		if hh.Flags()&FlagDDGST == 0 {
			return nil, errors.New("data digest flag missing")
		}
		if _, err := io.ReadFull(h.c, h.dig[:]); err != nil {
			return nil, err
		}
		if GetDigest(h.dig[:]) != Digest(into[off:off+n]) {
			return nil, errors.New("C2HData data digest mismatch")
		}
	}
	return hh, nil
}

// exec runs one command: in-capsule data (inline), data sent on R2T
// (write), data read back (read). It returns the completion.
func (h *testHost) exec(cmd nvme.Command, inline, write, read []byte) nvme.Completion {
	h.t.Helper()
	c, err := h.tryExec(cmd, inline, write, read)
	if err != nil {
		h.t.Fatalf("opcode %#x: %v", cmd.Opcode(), err)
	}
	return c
}

func (h *testHost) tryExec(cmd nvme.Command, inline, write, read []byte) (nvme.Completion, error) {
	h.cid++
	cmd.SetCID(h.cid)
	h.sendCapsule(cmd, inline)
	if h.err != nil {
		return nil, h.err
	}
	for {
		hh, err := h.readPDU(read)
		if err != nil {
			return nil, err
		}
		switch hh.Type() {
		case TypeR2T:
			if hh.CID() != h.cid {
				return nil, errors.New("R2T for another command")
			}
			off, n := hh.Offset(), hh.Length()
			tag := hh.TTag()
			for n > 0 {
				k := min(n, h.maxH2C)
				h.sendH2C(h.cid, tag, off, write[off:off+k], k == n)
				off, n = off+k, n-k
			}
		case TypeC2HData:
			if hh.Flags()&FlagDataSuccess == 0 {
				continue
			}
			if hh.Flags()&FlagDataLast == 0 || hh.CID() != h.cid {
				return nil, errors.New("SUCCESS on a C2HData that is not the command's last")
			}
			h.successes++
			clear(h.rsp[:])
			rsp := nvme.Completion(h.rsp[:])
			rsp.Set(0, 0, 0, h.cid, 0)
			return rsp, nil
		case TypeCapsuleRsp:
			copy(h.rsp[:], hh.Response())
			rsp := nvme.Completion(h.rsp[:])
			if rsp.CID() != h.cid {
				return nil, errors.New("response for another command")
			}
			return rsp, nil
		case TypeC2HTermReq:
			return nil, &PDUError{FES: hh.FES(), FEI: hh.FEI(), Msg: "C2HTermReq"}
		default:
			return nil, fmt.Errorf("unexpected PDU type %#x", hh.Type())
		}
	}
}

func newCmd(op uint8) nvme.Command {
	c := make(nvme.Command, nvme.CommandSize)
	c.SetOpcode(op)
	c.SetFlags(nvme.PSDTSGLContig)
	transportSGL(c, 0)
	return c
}

// transportSGL describes n bytes moved by R2T or C2HData, as the Linux host.
func transportSGL(c nvme.Command, n uint32) {
	s := c.SGL()
	clear(s)
	s[15] = SGLTransportData
	s[8], s[9], s[10], s[11] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
}

// connectAdmin connects the admin queue and enables the controller.
func (h *testHost) connectAdmin(subnqn string) {
	h.t.Helper()
	c := newCmd(nvme.OpFabrics)
	c.SetConnect(0, 31, 0)
	c.SetConnectCAttr(h.cattr)
	c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, nvme.ConnectDataSize)
	rsp := h.exec(c, connectData(subnqn, 0xffff), nil, nil)
	if rsp.Status() != 0 {
		h.t.Fatalf("admin connect: %v", rsp.Status())
	}
	h.cntl = uint16(rsp.Result())
	if subnqn == nvme.DiscoveryNQN {
		h.property(nvme.RegCC, nvme.CCEnable)
		return
	}
	h.property(nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
}

func (h *testHost) property(off uint32, v uint64) {
	h.t.Helper()
	c := newCmd(0)
	c.SetProperty(true, false, off, v)
	if rsp := h.exec(c, nil, nil, nil); rsp.Status() != 0 {
		h.t.Fatalf("property set %#x: %v", off, rsp.Status())
	}
}

// connectIO connects an I/O queue of the controller cntl; the Connect
// data goes on R2T when inline is false.
func (h *testHost) connectIO(subnqn string, cntl uint16, inline bool) nvme.Status {
	h.t.Helper()
	c := newCmd(nvme.OpFabrics)
	c.SetConnect(1, 127, 0)
	c.SetConnectCAttr(h.cattr)
	d := connectData(subnqn, cntl)
	if inline {
		c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, nvme.ConnectDataSize)
		return h.exec(c, d, nil, nil).Status()
	}
	transportSGL(c, nvme.ConnectDataSize)
	return h.exec(c, nil, d, nil).Status()
}

func connectData(subnqn string, cntlid uint16) []byte {
	b := make([]byte, nvme.ConnectDataSize)
	nvme.ConnectData{HostID: [16]byte{9}, CNTLID: cntlid, SubNQN: subnqn, HostNQN: hostNQN}.Encode(b)
	return b
}

func (h *testHost) identify(cns uint8, nsid uint32) ([]byte, nvme.Status) {
	c := newCmd(nvme.AdminIdentify)
	transportSGL(c, nvme.IdentifySize)
	c.SetNSID(nsid)
	c.SetCDW(10, uint32(cns))
	b := make([]byte, nvme.IdentifySize)
	return b, h.exec(c, nil, nil, b).Status()
}

// rwCmd builds a read or write of len(data) bytes at slba.
func rwCmd(c nvme.Command, op uint8, slba uint64, n int, inline bool) {
	clear(c)
	c.SetOpcode(op)
	c.SetFlags(nvme.PSDTSGLContig)
	c.SetNSID(1)
	c.SetSLBA(slba)
	c.SetCDW(12, uint32(n/512-1))
	if inline {
		c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, uint32(n))
	} else {
		transportSGL(c, uint32(n))
	}
}

func (h *testHost) write(slba uint64, data []byte, inline bool) nvme.Status {
	rwCmd(h.cmd[:], nvme.IOWrite, slba, len(data), inline)
	if inline {
		return h.exec(h.cmd[:], data, nil, nil).Status()
	}
	return h.exec(h.cmd[:], nil, data, nil).Status()
}

func (h *testHost) read(slba uint64, data []byte) nvme.Status {
	rwCmd(h.cmd[:], nvme.IORead, slba, len(data), false)
	return h.exec(h.cmd[:], nil, nil, data).Status()
}
