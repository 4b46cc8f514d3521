package tcphost

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp"
	"golang.org/x/sys/unix"
)

// Timeout bounds each synchronous step: the ICResp, and the responses of
// Connect, Property Set and Set Features.
const Timeout = 10 * time.Second

// HostNQN is the host NQN a Conn connects as unless told otherwise.
const HostNQN = "nqn.2014-08.org.nvmexpress:uuid:7e57ca5e-0000-4000-8000-000000000bad"

// Conn is one NVMe/TCP connection of a raw host: no digests, commands
// numbered from 1.
type Conn struct {
	nc   net.Conn
	cid  uint16
	cntl uint16 // the controller, after ConnectAdmin
	Host string
	hdr  [256]byte
}

// Dial opens a TCP connection and sends nothing.
func Dial(addr string) (*Conn, error) { return DialFrom("", addr) }

// DialFrom is Dial from local address from ("": any).
func DialFrom(from, addr string) (*Conn, error) {
	d := net.Dialer{Timeout: Timeout}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Conn{nc: nc, Host: HostNQN}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Controller is the controller ID ConnectAdmin got.
func (c *Conn) Controller() uint16 { return c.cntl }

// ICReq initializes the connection.
func (c *Conn) ICReq() error {
	var b [tcp.ICReqSize]byte
	tcp.PutICReq(b[:], tcp.PFV, 0, 0, 0)
	if _, err := c.nc.Write(b[:]); err != nil {
		return fmt.Errorf("ICReq: %w", err)
	}
	c.nc.SetReadDeadline(time.Now().Add(Timeout))
	defer c.nc.SetReadDeadline(time.Time{})
	var r [tcp.ICRespSize]byte
	if _, err := io.ReadFull(c.nc, r[:]); err != nil {
		return fmt.Errorf("ICResp: %w", err)
	}
	if h := tcp.Header(r[:]); h.Type() != tcp.TypeICResp {
		return fmt.Errorf("ICResp: PDU type %#x", h.Type())
	}
	return nil
}

// Send sends cmd with in-capsule data inline (may be nil) and does not
// wait for anything.
func (c *Conn) Send(cmd nvme.Command, inline []byte) error {
	c.cid++
	cmd.SetCID(c.cid)
	plen, pdo := uint32(tcp.CapsuleCmdHLen), uint8(0)
	if len(inline) > 0 {
		pdo = uint8(plen)
		plen += uint32(len(inline))
	}
	var b [tcp.CapsuleCmdHLen]byte
	tcp.PutCommon(b[:], tcp.TypeCapsuleCmd, 0, tcp.CapsuleCmdHLen, pdo, plen)
	copy(b[tcp.CommonHeaderSize:], cmd)
	if _, err := c.nc.Write(b[:]); err != nil {
		return err
	}
	if len(inline) > 0 {
		if _, err := c.nc.Write(inline); err != nil {
			return err
		}
	}
	return nil
}

// Exec sends cmd and waits for its response; it moves no data other
// than the in-capsule data inline.
func (c *Conn) Exec(cmd nvme.Command, inline []byte) (nvme.Completion, error) {
	if err := c.Send(cmd, inline); err != nil {
		return nil, err
	}
	for {
		rsp, err := c.Next()
		if err != nil || rsp.CID() == c.cid {
			return rsp, err
		}
		// A response to a command sent without waiting.
	}
}

// Next reads past data to the next response, of any command.
func (c *Conn) Next() (nvme.Completion, error) {
	c.nc.SetReadDeadline(time.Now().Add(Timeout))
	defer c.nc.SetReadDeadline(time.Time{})
	for {
		if _, err := io.ReadFull(c.nc, c.hdr[:tcp.CommonHeaderSize]); err != nil {
			return nil, err
		}
		h := tcp.Header(c.hdr[:])
		if h.Type() == tcp.TypeC2HData {
			// Data of this command or of one sent without waiting: read
			// past it.
			if _, err := io.CopyN(io.Discard, c.nc, int64(h.PLen())-tcp.CommonHeaderSize); err != nil {
				return nil, err
			}
			continue
		}
		if h.PLen() > uint32(len(c.hdr)) || h.PLen() < tcp.CommonHeaderSize {
			return nil, fmt.Errorf("PDU type %#x of %d bytes while waiting for a response", h.Type(), h.PLen())
		}
		if _, err := io.ReadFull(c.nc, c.hdr[tcp.CommonHeaderSize:h.PLen()]); err != nil {
			return nil, err
		}
		switch h.Type() {
		case tcp.TypeCapsuleRsp:
			return nvme.Completion(append([]byte(nil), h.Response()...)), nil
		case tcp.TypeC2HTermReq:
			return nil, fmt.Errorf("C2HTermReq FES %#x", h.FES())
		}
	}
}

// command is a command of opcode op whose data, if any, moves by R2T or
// C2HData.
func command(op uint8, n uint32) nvme.Command {
	c := make(nvme.Command, nvme.CommandSize)
	c.SetOpcode(op)
	c.SetFlags(nvme.PSDTSGLContig)
	s := c.SGL()
	s[15] = tcp.SGLTransportData
	s[8], s[9], s[10], s[11] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	return c
}

func (c *Conn) connect(qid, sqsize uint16, kato uint32, subnqn string, cntlid uint16) (nvme.Completion, error) {
	cmd := command(nvme.OpFabrics, 0)
	cmd.SetConnect(qid, sqsize-1, kato)
	cmd.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, nvme.ConnectDataSize)
	d := make([]byte, nvme.ConnectDataSize)
	nvme.ConnectData{HostID: [16]byte{0xba, 0xd}, CNTLID: cntlid, SubNQN: subnqn, HostNQN: c.Host}.Encode(d)
	rsp, err := c.Exec(cmd, d)
	if err == nil && rsp.Status() != 0 {
		err = fmt.Errorf("Connect of queue %d: %v", qid, rsp.Status())
	}
	return rsp, err
}

// ConnectAdmin connects the admin queue to subnqn with keep alive kato
// (ms), enables the controller and asks for ioQueues I/O queues.
func (c *Conn) ConnectAdmin(subnqn string, kato uint32, ioQueues uint16) error {
	if err := c.ICReq(); err != nil {
		return err
	}
	rsp, err := c.connect(0, 32, kato, subnqn, nvme.ControllerIDDynamic)
	if err != nil {
		return err
	}
	c.cntl = uint16(rsp.Result())
	prop := command(nvme.OpFabrics, 0)
	prop.SetProperty(true, false, nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
	if rsp, err := c.Exec(prop, nil); err != nil || rsp.Status() != 0 {
		return errors.Join(errors.New("enabling the controller"), err)
	}
	nq := command(nvme.AdminSetFeatures, 0)
	n := uint32(ioQueues - 1)
	nq.SetCDW(10, nvme.FeatNumQueues)
	nq.SetCDW(11, n|n<<16)
	if rsp, err := c.Exec(nq, nil); err != nil || rsp.Status() != 0 {
		return errors.Join(errors.New("Set Features Number of Queues"), err)
	}
	return nil
}

// ConnectIO connects this connection as I/O queue qid of the controller
// cntlid, with sqsize entries.
func (c *Conn) ConnectIO(subnqn string, cntlid, qid, sqsize uint16) error {
	if err := c.ICReq(); err != nil {
		return err
	}
	_, err := c.connect(qid, sqsize, 0, subnqn, cntlid)
	c.cntl = cntlid
	return err
}

// KeepAlive sends a Keep Alive and does not wait for its response (the
// caller may not be reading the socket).
func (c *Conn) KeepAlive() error { return c.Send(command(nvme.AdminKeepAlive, 0), nil) }

// ReadWrite sends a read or write of n bytes at slba of namespace nsid,
// in blocks of lba bytes, whose data moves by R2T or C2HData, and does
// not wait.
func (c *Conn) ReadWrite(op uint8, nsid uint32, slba uint64, n, lba uint32) error {
	cmd := command(op, n)
	cmd.SetNSID(nsid)
	cmd.SetSLBA(slba)
	cmd.SetCDW(12, n/lba-1)
	return c.Send(cmd, nil)
}

// Identify runs an Identify of cns and waits for it, reading past its data.
func (c *Conn) Identify(cns uint8) (nvme.Status, error) {
	cmd := command(nvme.AdminIdentify, nvme.IdentifySize)
	cmd.SetCDW(10, uint32(cns))
	rsp, err := c.Exec(cmd, nil)
	if err != nil {
		return 0, err
	}
	return rsp.Status(), nil
}

// Read reads n bytes at slba of namespace nsid and waits for it, reading
// past its data.
func (c *Conn) Read(nsid uint32, slba uint64, n, lba uint32) (nvme.Status, error) {
	cmd := command(nvme.IORead, n)
	cmd.SetNSID(nsid)
	cmd.SetSLBA(slba)
	cmd.SetCDW(12, n/lba-1)
	rsp, err := c.Exec(cmd, nil)
	if err != nil {
		return 0, err
	}
	return rsp.Status(), nil
}

// PeerClosed reports whether the target closed the connection, without
// reading from it (a host that never reads its reads' data must not).
func (c *Conn) PeerClosed() bool {
	rc, err := c.nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	rc.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if n, err := unix.Poll(p, 0); err == nil && n > 0 {
			closed = p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		}
	})
	return closed
}

// Controller dials addr from local address from ("": any), connects the
// admin queue as host (HostNQN when "") and asks for ioQueues I/O queues.
// The caller keeps the returned connection reachable (closes it when
// done): a collected one closes.
func Controller(from, addr, subnqn, host string, ioQueues uint16) (*Conn, error) {
	admin, err := DialFrom(from, addr)
	if err != nil {
		return nil, err
	}
	if host != "" {
		admin.Host = host
	}
	if err := admin.ConnectAdmin(subnqn, 15000, ioQueues); err != nil {
		admin.Close()
		return nil, err
	}
	return admin, nil
}

// IOQueue dials addr from local address from and connects it as I/O queue
// qid of the admin connection's controller, with sqsize entries.
func (c *Conn) IOQueue(from, addr, subnqn string, qid, sqsize uint16) (*Conn, error) {
	io, err := DialFrom(from, addr)
	if err != nil {
		return nil, err
	}
	io.Host = c.Host
	if err := io.ConnectIO(subnqn, c.cntl, qid, sqsize); err != nil {
		io.Close()
		return nil, err
	}
	return io, nil
}
