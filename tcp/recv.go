package tcp

import (
	"errors"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// The receive side: a PDU arrives in phases (common header, rest of the
// header and its digest, padding, data, data digest), each read into its
// own destination. Small PDUs come through the stage buffer, many per
// read; large data is read straight into its command's buffer.

type phase uint8

const (
	phaseCommon phase = iota
	phaseHeader
	phasePad
	phaseData
	phaseDDigest
)

var (
	errEOF      = errors.New("the host closed the connection")
	errTLS      = errors.New("the host asked for TLS")
	errPeerTerm = errors.New("the host sent H2CTermReq")
)

type receiver struct {
	stage      []byte
	start, end int  // unread bytes of stage
	drained    bool // the last read or poll found the socket empty: skip one read

	phase  phase
	got    int // bytes of the current phase received
	hdr    [ICReqSize + DigestSize]byte
	layout Layout
	dst    []byte // phaseData's destination
	crc    uint32
	ddgst  [DigestSize]byte
	pad    [255]byte
	req    *request // the command the PDU's data is for
}

func (rx *receiver) reset() {
	rx.phase, rx.got, rx.dst, rx.req = phaseCommon, 0, nil, nil
}

// hdrLen is how much of the current PDU's header has arrived.
func (rx *receiver) hdrLen() int {
	switch rx.phase {
	case phaseCommon:
		return rx.got
	case phaseHeader:
		return CommonHeaderSize + rx.got
	}
	return rx.layout.Header
}

// want is where the next received bytes go.
func (rx *receiver) want() []byte {
	switch rx.phase {
	case phaseCommon:
		return rx.hdr[rx.got:CommonHeaderSize]
	case phaseHeader:
		return rx.hdr[CommonHeaderSize+rx.got : rx.layout.Header]
	case phasePad:
		return rx.pad[rx.got:rx.layout.Pad]
	case phaseData:
		return rx.dst[rx.got:]
	default:
		return rx.ddgst[rx.got:rx.layout.DDigest]
	}
}

// receive reads what the socket has and handles every PDU completed. It
// returns the bytes read. A read that comes back short has emptied the
// socket: the pass ends there rather than with a read that fails with
// EAGAIN, and the next pass, which would only find it empty again, skips
// its read; so does the first pass after a poll(2) that did not report the
// socket readable. One skip only: a poller kept busy by completions reads
// on the pass after, and still hears the host.
func (c *Conn) receive() (int, error) {
	rx := &c.rx
	if rx.drained {
		rx.drained = false
		return 0, nil
	}
	total := 0
	for range readsPerPass {
		if c.rxWait > 0 {
			return total, nil
		}
		if rx.start == rx.end {
			if rx.drained { // this pass's short read
				return total, nil
			}
			w := rx.want()
			direct := rx.phase == phaseData && len(w) >= directRead
			buf := rx.stage
			if direct {
				buf = w
			}
			c.reads++
			n, err := rawRead(c.fd, buf)
			if err != nil {
				if err == unix.EAGAIN {
					rx.drained = true
					return total, nil
				}
				if err == unix.EINTR {
					return total, nil
				}
				return total, err
			}
			if n == 0 {
				return total, errEOF
			}
			// A stream socket returns less than asked only when it had
			// no more.
			rx.drained = n < len(buf)
			total += n
			if direct {
				if err := c.landed(n); err != nil {
					return total, err
				}
				continue
			}
			rx.start, rx.end = 0, n
		}
		for rx.start < rx.end {
			n := copy(rx.want(), rx.stage[rx.start:rx.end])
			rx.start += n
			if err := c.landed(n); err != nil {
				return total, err
			}
			if c.closing || c.stopping.Load() || c.rxWait > 0 {
				return total, nil
			}
		}
	}
	return total, nil
}

// landed accounts n bytes received into the current phase and moves on
// when it is complete.
func (c *Conn) landed(n int) error {
	rx := &c.rx
	if rx.phase == phaseData && c.lim.DataDigest {
		rx.crc = UpdateDigest(rx.crc, rx.dst[rx.got:rx.got+n])
	}
	rx.got += n
	if len(rx.want()) > 0 {
		return nil
	}
	return c.nextPhase()
}

// nextPhase ends the current phase and skips the empty ones after it.
func (c *Conn) nextPhase() error {
	rx := &c.rx
	for {
		var err error
		switch rx.phase {
		case phaseCommon:
			err = c.onCommon()
			rx.phase = phaseHeader
		case phaseHeader:
			err = c.onHeader()
			rx.phase = phasePad
		case phasePad:
			rx.phase = phaseData
		case phaseData:
			rx.phase = phaseDDigest
		case phaseDDigest:
			err = c.onPDU()
			rx.reset()
			return err
		}
		if err != nil {
			return err
		}
		rx.got = 0
		if c.rxWait > 0 || len(rx.want()) > 0 {
			return nil
		}
	}
}

// inCapsuleBuffer gives a capsule's n bytes of in-capsule data a pool
// buffer: the pool counts them as it counts the data of R2Ts. With none
// to be had, the receiver stops until a buffer comes back (rxWait) and
// the host's next bytes wait in its socket. Unless the connection has
// R2Ts outstanding: their data may be behind this capsule in the stream,
// and the buffers they hold would come back only once the receiver went
// on; then the buffer is lent past the limit, up to maxOver bytes for the
// connection; past that it waits as for any buffer, until one of its own
// commands or another's gives one back. The data deadline bounds how long
// a connection keeps them.
func (c *Conn) inCapsuleBuffer(r *request, n uint32) {
	b := c.poolBuffer(n)
	if b == nil && c.st.r2tOut > 0 {
		b = c.srv.pool.getOver(n, &c.acct)
		r.over = b != nil
	}
	if b == nil {
		c.rxWait = n
		c.updateWaiting()
		return
	}
	r.buf = b
	c.rx.dst = (*b)[:n]
}

// resumeCapsule continues receiving a capsule's in-capsule data once the
// pool lends a buffer for it.
func (c *Conn) resumeCapsule() error {
	rx := &c.rx
	n := c.rxWait
	c.rxWait = 0
	c.inCapsuleBuffer(rx.req, n)
	if c.rxWait > 0 {
		return nil
	}
	c.updateWaiting()
	rx.drained = false // the stage may hold the data
	if len(rx.want()) == 0 {
		return c.nextPhase()
	}
	return nil
}

// onCommon validates the common header.
func (c *Conn) onCommon() error {
	rx := &c.rx
	if !c.initialized && rx.hdr[0] == 0x16 && rx.hdr[1] == 0x03 {
		return errTLS // a TLS handshake record, not an ICReq
	}
	l, err := CheckCommon(Header(rx.hdr[:]), c.initialized, c.lim)
	if err != nil {
		return err
	}
	rx.layout = l
	return nil
}

// onHeader checks the header digest and finds where the data goes.
func (c *Conn) onHeader() error {
	rx := &c.rx
	h := Header(rx.hdr[:])
	hlen := int(h.HLen())
	if rx.layout.Header > hlen {
		if err := CheckHeaderDigest(rx.hdr[:], hlen); err != nil {
			return err
		}
	}
	rx.crc = 0
	switch h.Type() {
	case TypeICReq:
		return CheckICReq(h)
	case TypeH2CTermReq:
		rx.dst = rx.pad[:rx.layout.Data]
	case TypeCapsuleCmd:
		return c.onCapsuleHeader(h)
	case TypeH2CData:
		return c.onDataHeader(h)
	}
	return nil
}

func (c *Conn) onCapsuleHeader(h Header) error {
	rx := &c.rx
	if c.fq == nil {
		c.openQueue(nvme.Command(h.Capsule()))
	}
	c.sq.received++
	r := c.takeRequest()
	if r == nil || c.sqOverrun() {
		c.srv.stats.Overruns.Add(1)
		return pduErr(FESSequence, 0, "more commands than the queue size (%d) the host connected with", c.sqLimit())
	}
	copy(r.cmd[:], h.Capsule())
	rx.req = r
	if n := rx.layout.Data; n > 0 {
		c.inCapsuleBuffer(r, uint32(n))
	}
	c.lim.MaxInline = c.maxInl
	return nil
}

// sqCount follows the host's view of its submission queue.
type sqCount struct {
	received uint64 // command capsules received
	reported uint64 // received when the last completion was queued
}

// sqOverrun reports whether the host submitted to a full submission
// queue. Its SQ holds the commands sent since the head (SQHD) of the last
// completion it could have seen; the target consumes each on arrival,
// so every completion queued reports all received as consumed (counted
// generously: one may still wait for its in-capsule data). Like the
// Linux host, a host may fill all SQSIZE entries. The Linux target
// instead allows twice SQSIZE commands in flight; counting by SQHD is
// the specification's rule and needs no guess.
func (c *Conn) sqOverrun() bool {
	n := c.fq.SQSize()
	return n > 0 && c.sq.received-c.sq.reported > uint64(n)
}

// sqLimit is the most commands the host may have submitted unseen.
func (c *Conn) sqLimit() int {
	if n := c.fq.SQSize(); n > 0 {
		return n
	}
	return len(c.reqs)
}

// onDataHeader checks an H2CData PDU against its command's R2T.
func (c *Conn) onDataHeader(h Header) error {
	rx := &c.rx
	tag := int(h.TTag())
	if tag >= len(c.reqs) {
		return pduErr(FESInvalidHeader, FieldTTag, "H2CData for transfer tag %d, the queue has %d", tag, len(c.reqs))
	}
	r := &c.reqs[tag]
	if r.state != reqR2T || h.CID() != r.Cmd.CID() {
		return pduErr(FESSequence, 0, "H2CData for command %d (transfer tag %d), which has no R2T outstanding", h.CID(), tag)
	}
	off, n := h.Offset(), h.Length()
	if n != uint32(rx.layout.Data) {
		return pduErr(FESInvalidHeader, dataLength, "H2CData length %d, the PDU carries %d", n, rx.layout.Data)
	}
	if n == 0 {
		// Data that moves nothing: no host sends it, and the Linux
		// target (nvmet_tcp_handle_h2c_data_pdu) refuses it as we do,
		// so that PDUs which carry nothing cannot keep a transfer
		// looking alive.
		return pduErr(FESInvalidHeader, dataLength, "H2CData of no data")
	}
	if off != r.recvd || uint64(off)+uint64(n) > uint64(r.Len) {
		return pduErr(FESDataOutOfRange, 0, "H2CData offset %d length %d, the transfer is %d bytes and %d arrived", off, n, r.Len, r.recvd)
	}
	// LAST_PDU marks the PDU that ends the R2T's data, and only that one
	// (NVMe/TCP 1.0, H2CData). The Linux target does not look at the
	// flag; a host that sets it wrong has lost count of its transfer.
	if last := h.Flags()&FlagDataLast != 0; last != (off+n == r.Len) {
		return pduErr(FESInvalidHeader, FieldFlags, "H2CData LAST_PDU %v at offset %d length %d of a %d-byte transfer", last, off, n, r.Len)
	}
	rx.dst = r.Data[off : off+n]
	rx.req = r
	return nil
}

// onPDU handles a PDU once all of it has arrived.
func (c *Conn) onPDU() error {
	rx := &c.rx
	h := Header(rx.hdr[:])
	badData := c.lim.DataDigest && rx.layout.DDigest > 0 && GetDigest(rx.ddgst[:]) != rx.crc
	switch h.Type() {
	case TypeICReq:
		c.answerICReq(h)
	case TypeH2CTermReq:
		c.log.WithFields(logrus.Fields{"fes": h.FES(), "fei": h.FEI()}).Warn("the host ended the connection with H2CTermReq")
		return errPeerTerm
	case TypeCapsuleCmd:
		r := rx.req
		if badData {
			c.srv.stats.DataDigestErrors.Add(1)
			r.badData = true
		}
		c.startCommand(r, rx.dst)
	case TypeH2CData:
		r := rx.req
		if badData {
			c.srv.stats.DataDigestErrors.Add(1)
			r.badData = true
		}
		r.recvd += uint32(rx.layout.Data)
		if r.recvd == r.Len {
			c.dataArrived(r)
		}
	}
	return nil
}

// answerICReq sends the ICResp: the digests the host asked for, no data
// alignment of ours, and MaxH2CData.
func (c *Conn) answerICReq(h Header) {
	d := h.DigestBits()
	c.lim.HeaderDigest = d&DigestHeader != 0
	c.lim.DataDigest = d&DigestData != 0
	c.hpdaAlign = (int(h.HPDA()) + 1) * 4
	c.initialized = true
	PutICResp(c.icresp[:], d&(DigestHeader|DigestData), MaxH2CData)
	c.tx.queue(c.icresp[:], nil)
}
