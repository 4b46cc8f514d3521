package tcp

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"golang.org/x/sys/unix"
)

// The send side: PDUs are queued as segments (headers written in their
// request, data in place) and go out in one writev per poller pass. A
// request goes back to the free list once its last segment is sent.

type sender struct {
	segs   [][]byte
	owners []*request // the request released when the segment is sent, or nil
	head   int
	iov    []unix.Iovec
}

// segsPerRequest is the most segments one command queues: C2HData header,
// padding, data, data digest and the response.
const segsPerRequest = 5

func (tx *sender) init(depth int) {
	n := depth*segsPerRequest + 4
	tx.segs = make([][]byte, 0, n)
	tx.owners = make([]*request, 0, n)
	tx.iov = make([]unix.Iovec, min(n, maxIOV))
}

func (tx *sender) pending() bool { return tx.head < len(tx.segs) }

// queue appends a segment; owner, if set, is released once it is sent.
func (tx *sender) queue(b []byte, owner *request) {
	if len(b) == 0 && owner == nil {
		return
	}
	tx.segs = append(tx.segs, b)
	tx.owners = append(tx.owners, owner)
}

// flush writes the queued segments until the socket is full.
func (c *Conn) flush() error {
	tx := &c.tx
	for tx.pending() {
		if len(tx.iov) == 0 {
			tx.iov = make([]unix.Iovec, 16)
		}
		n := 0
		for i := tx.head; i < len(tx.segs) && n < len(tx.iov); i++ {
			if s := tx.segs[i]; len(s) > 0 {
				tx.iov[n].Base = &s[0]
				tx.iov[n].SetLen(len(s))
				n++
			}
		}
		wrote := 0
		if n > 0 {
			c.writevs++
			w, errno := rawWritev(c.fd, tx.iov[:n])
			if errno == unix.EAGAIN {
				c.wantOut = true
				return nil
			}
			if errno == unix.EINTR {
				continue
			}
			if errno != 0 {
				return errno
			}
			wrote = w
		}
		c.advance(wrote)
	}
	tx.segs, tx.owners, tx.head = tx.segs[:0], tx.owners[:0], 0
	c.wantOut = false
	return nil
}

// advance drops n sent bytes off the queue, releasing the requests whose
// PDUs are all sent.
func (c *Conn) advance(n int) {
	tx := &c.tx
	for tx.head < len(tx.segs) {
		s := tx.segs[tx.head]
		if n < len(s) {
			tx.segs[tx.head] = s[n:]
			return
		}
		n -= len(s)
		if r := tx.owners[tx.head]; r != nil {
			c.release(r)
			c.st.sent++
		}
		tx.segs[tx.head], tx.owners[tx.head] = nil, nil
		tx.head++
	}
}

// flags is the common header flags of a PDU this side sends.
func (c *Conn) flags(data bool) uint8 {
	var f uint8
	if c.lim.HeaderDigest {
		f |= FlagHDGST
	}
	if data && c.lim.DataDigest {
		f |= FlagDDGST
	}
	return f
}

// hdgst is the header digest's size on this connection.
func (c *Conn) hdgst() int {
	if c.lim.HeaderDigest {
		return DigestSize
	}
	return 0
}

// putHeaderDigest writes the digest of b[:hlen] after it.
func (c *Conn) putHeaderDigest(b []byte, hlen int) {
	if c.lim.HeaderDigest {
		PutDigest(b[hlen:], Digest(b[:hlen]))
	}
}

// sendR2T asks the host for all of r's data.
func (c *Conn) sendR2T(r *request) {
	hd := c.hdgst()
	PutCommon(r.r2t[:], TypeR2T, c.flags(false), R2TSize, 0, uint32(R2TSize+hd))
	PutData(r.r2t[:], r.Cmd.CID(), uint16(r.Tag), 0, r.Len)
	c.putHeaderDigest(r.r2t[:], R2TSize)
	c.tx.queue(r.r2t[:R2TSize+hd], nil)
	c.st.r2tOut++
}

// Complete implements fabrics.QueueTransport: a read's data goes in one
// C2HData PDU, then the response. Where the host disabled SQ flow control
// at Connect, a read that succeeded with nothing in its completion's
// result has the SUCCESS flag on its C2HData instead of a response, as on
// the Linux target: the specification allows it only there, since the
// response would carry the SQ head.
func (c *Conn) Complete(fr *fabrics.Request) {
	r := &c.reqs[fr.Tag]
	c.sq.reported = c.sq.received
	if r.Dir == fabrics.DirCtrlToHost && r.Status() == 0 && r.Len > 0 {
		if c.fq.SQFlowControlDisabled() && nvme.Completion(r.Rsp).Result() == 0 {
			c.queueC2HData(r, FlagDataSuccess, r)
			return
		}
		c.queueC2HData(r, 0, nil)
	}
	hd := c.hdgst()
	PutCommon(r.rsp[:], TypeCapsuleRsp, c.flags(false), CapsuleRspHLen, 0, uint32(CapsuleRspHLen+hd))
	c.putHeaderDigest(r.rsp[:], CapsuleRspHLen)
	c.tx.queue(r.rsp[:CapsuleRspHLen+hd], r)
}

// queueC2HData queues r's data in one C2HData PDU with flags added to
// LAST_PDU; owner, if set, is released once its last byte is sent.
func (c *Conn) queueC2HData(r *request, flags uint8, owner *request) {
	hd := c.hdgst()
	hlen := DataHdrSize + hd
	pdo := (hlen + c.hpdaAlign - 1) / c.hpdaAlign * c.hpdaAlign
	dd := 0
	if c.lim.DataDigest {
		dd = DigestSize
	}
	PutCommon(r.dataHdr[:], TypeC2HData, c.flags(true)|FlagDataLast|flags, DataHdrSize, uint8(pdo), uint32(pdo)+r.Len+uint32(dd))
	PutData(r.dataHdr[:], r.Cmd.CID(), 0, 0, r.Len)
	c.putHeaderDigest(r.dataHdr[:], DataHdrSize)
	c.tx.queue(r.dataHdr[:hlen], nil)
	c.tx.queue(c.zeros[:pdo-hlen], nil)
	if dd == 0 {
		c.tx.queue(r.Data[:r.Len], owner)
		return
	}
	c.tx.queue(r.Data[:r.Len], nil)
	PutDigest(r.ddgst[:], Digest(r.Data[:r.Len]))
	c.tx.queue(r.ddgst[:], owner)
}
