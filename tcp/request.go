package tcp

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// reqState is where a command is on its connection.
type reqState uint8

const (
	reqFree       reqState = iota
	reqReceiving           // its capsule's in-capsule data is arriving
	reqNeedBuffer          // waiting for a pool buffer
	reqR2T                 // R2T sent: its data arrives in H2CData PDUs
	reqFabrics             // with fabrics: executing, or completed and being sent
)

// request is a command on a connection, reused; its index is the R2T's
// transfer tag (TTAG).
type request struct {
	fabrics.Request
	state   reqState
	cmd     [nvme.CommandSize]byte
	capData []byte  // this command's in-capsule data (in buf): kept while it waits on QoS
	buf     *[]byte // pool buffer of Data or of the in-capsule data
	over    bool    // buf was lent past the pool's limit (getOver)
	recvd   uint32  // data bytes received so far (the next H2CData's offset)
	badData bool    // a data digest error: the command fails once its data is in

	// PDUs this request sends, written in place so that sending
	// allocates nothing: C2HData header (+ digest), data digest, R2T,
	// CapsuleResp (+ digest; Rsp points into it).
	dataHdr [DataHdrSize + DigestSize]byte
	ddgst   [DigestSize]byte
	r2t     [R2TSize + DigestSize]byte
	rsp     [CapsuleRspHLen + DigestSize]byte
}

// dropBuffer gives r's pool buffer back.
func (c *Conn) dropBuffer(r *request) {
	if r.buf != nil {
		if r.over {
			c.srv.pool.putOver(r.buf, &c.acct)
		} else {
			c.srv.pool.put(r.buf, &c.acct)
		}
		r.buf, r.over = nil, false
	}
	r.Data = nil
}

// takeRequest finds a free request for a new command capsule.
func (c *Conn) takeRequest() *request {
	if len(c.free) == 0 {
		return nil
	}
	r := &c.reqs[c.free[len(c.free)-1]]
	c.free = c.free[:len(c.free)-1]
	r.state, r.recvd, r.badData = reqReceiving, 0, false
	return r
}

// release returns a request whose response is sent.
func (c *Conn) release(r *request) {
	c.dropBuffer(r)
	r.state = reqFree
	c.free = append(c.free, int32(r.Tag))
}

// startCommand runs a command whose capsule, in-capsule data included,
// has arrived.
func (c *Conn) startCommand(r *request, inline []byte) {
	r.state = reqFabrics
	r.capData = inline
	if !c.fq.Prepare(&r.Request) {
		// Completed with an error, or waiting on its namespace's QoS
		// limit: fabrics hands it back through Resume (qos.go).
		return
	}
	c.mapData(r)
}

// mapData continues a prepared command: its data digest, its in-capsule
// data, or a pool buffer and R2T for its data, then Execute.
func (c *Conn) mapData(r *request) {
	inline := r.capData
	if r.badData {
		c.fq.Fail(&r.Request, nvme.StatusTransientTransport)
		return
	}
	sgl := r.Cmd.SGL()
	switch sgl.ID() {
	case nvme.SGLDataBlockOffset:
		// The descriptor describes exactly the capsule's data, and
		// MapInline checks it against the command's transfer. Capsule
		// data beyond the descriptor is Data SGL Length Invalid too.
		// Commands that take no data (Set Features of a feature we keep
		// no data for) go on without it, as before.
		if r.Dir == fabrics.DirHostToCtrl && uint64(len(inline)) > uint64(sgl.Length()) {
			c.fq.Fail(&r.Request, nvme.StatusSGLInvalidData|nvme.DNR)
			return
		}
		if r.Len > 0 {
			if st := r.MapInline(inline); st != 0 {
				c.fq.Fail(&r.Request, st)
				return
			}
		}
		c.fq.Execute(&r.Request)
	case SGLTransportData:
		switch {
		case len(inline) > 0:
			// Data in the capsule that the descriptor does not describe.
			c.fq.Fail(&r.Request, nvme.StatusSGLInvalidOffset|nvme.DNR)
		case r.Len == 0:
			c.fq.Execute(&r.Request)
		case sgl.Length() < r.Len:
			c.fq.Fail(&r.Request, nvme.StatusSGLInvalidData|nvme.DNR)
		default:
			c.needBuffer(r)
		}
	default:
		c.fq.Fail(&r.Request, nvme.StatusSGLInvalidType|nvme.DNR)
	}
}

// needBuffer gives r a pool buffer and starts its transfer, or queues it
// until a buffer comes back. Commands take buffers in arrival order.
func (c *Conn) needBuffer(r *request) {
	if len(c.bufWait) == 0 && c.tryBuffer(r) {
		c.startTransfer(r)
		return
	}
	r.state = reqNeedBuffer
	c.bufWait = append(c.bufWait, int32(r.Tag))
	c.updateWaiting()
}

// updateWaiting tells the pool the buffer the connection waits for
// first: its receiver's, or its first waiting command's.
func (c *Conn) updateWaiting() {
	n := c.rxWait
	if n == 0 && len(c.bufWait) > 0 {
		n = c.reqs[c.bufWait[0]].Len
	}
	c.srv.pool.waitingFor(&c.acct, n)
}

// tryBuffer takes a pool buffer for r's data, or reports that r waits.
func (c *Conn) tryBuffer(r *request) bool {
	b := c.poolBuffer(r.Len)
	if b == nil {
		return false
	}
	r.buf = b
	r.Data = (*b)[:r.Len]
	return true
}

// poolBuffer takes a pool buffer of n bytes, or registers the connection
// with the pool and tries once more: a buffer that came back between the
// first try and the registration woke nobody. nil: none to be had, the
// pool wakes the connection when one comes back. Admin commands and small
// transfers may take the reserve.
func (c *Conn) poolBuffer(n uint32) *[]byte {
	small := n <= smallTransfer || c.fq.QID == 0
	if b := c.srv.pool.get(n, &c.acct, small); b != nil {
		return b
	}
	c.srv.pool.wait(c)
	return c.srv.pool.get(n, &c.acct, small)
}

// readmitWaiters checks the commands waiting for a pool buffer again
// against the rules now in force, on a fence's Recheck: those refused
// fail as a command whose data cannot be mapped does, which ends their
// count in flight, instead of waiting for a buffer another host may
// never give back. A capsule whose in-capsule data waits (rxWait) is not
// admitted yet: Prepare checks it once its data is in.
func (c *Conn) readmitWaiters() {
	n := 0
	for _, tag := range c.bufWait {
		r := &c.reqs[tag]
		if st := c.fq.Readmit(&r.Request); st != 0 {
			r.state = reqFabrics
			c.fq.Fail(&r.Request, st)
			continue
		}
		c.bufWait[n] = tag
		n++
	}
	c.bufWait = c.bufWait[:n]
	c.updateWaiting()
}

// retryBuffers starts the waiting commands that now get a buffer.
func (c *Conn) retryBuffers() {
	n := 0
	for n < len(c.bufWait) {
		r := &c.reqs[c.bufWait[n]]
		if !c.tryBuffer(r) {
			break
		}
		n++
		c.startTransfer(r)
	}
	c.bufWait = c.bufWait[:copy(c.bufWait, c.bufWait[n:])]
	c.updateWaiting()
}

// startTransfer asks for a write's data with one R2T for all of it, or
// executes a read, whose data goes out with its completion.
func (c *Conn) startTransfer(r *request) {
	if r.Dir == fabrics.DirHostToCtrl {
		r.state = reqR2T
		c.sendR2T(r)
		return
	}
	r.state = reqFabrics
	if c.fq.QID == 0 || r.Cmd.Opcode() != nvme.IORead {
		// Pool buffers carry their last command's data, another host's
		// included; commands that build their data (Identify, log
		// pages) write only the fields they set.
		clear(r.Data)
	}
	c.fq.Execute(&r.Request)
}

// dataArrived runs a write whose data is all in.
func (c *Conn) dataArrived(r *request) {
	r.state = reqFabrics
	c.st.r2tOut--
	c.st.r2tDone++
	if r.badData {
		c.fq.Fail(&r.Request, nvme.StatusTransientTransport)
		return
	}
	c.fq.Execute(&r.Request)
}
