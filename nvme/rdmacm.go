package nvme

import (
	"encoding/binary"
	"errors"
)

// RDMA transport binding: the private data exchanged in RDMA CM connection
// request, accept and reject messages.

// CMRequestSize is the size of the host's CM request private data. RoCE
// transports report a longer private data length (56); only the first 32
// bytes are defined.
const CMRequestSize = 32

// CMAcceptSize is the size of the target's accept private data.
const CMAcceptSize = 32

// CMRejectSize is the size of the target's reject private data.
const CMRejectSize = 4

// Offsets within the CM private data (NVMe-oF RDMA transport binding,
// "RDMA_CM_REQUEST", "RDMA_CM_ACCEPT", "RDMA_CM_REJECT").
const (
	cmReqRecFmt  = 0
	cmReqQID     = 2
	cmReqHRQSize = 4
	cmReqHSQSize = 6
	cmReqCNTLID  = 8

	cmAccRecFmt  = 0
	cmAccCRQSize = 2

	cmRejRecFmt = 0
	cmRejStatus = 2
)

// CM reject status values.
const (
	CMRejectInvalidLength  = 0x01
	CMRejectInvalidRecFmt  = 0x02
	CMRejectInvalidQID     = 0x03
	CMRejectInvalidHSQSize = 0x04
	CMRejectInvalidHRQSize = 0x05
	CMRejectNoResources    = 0x06
	CMRejectInvalidIRD     = 0x07
	CMRejectInvalidORD     = 0x08
	CMRejectInvalidCNTLID  = 0x09
)

// CMRequest is the decoded host connection request.
type CMRequest struct {
	RecFmt  uint16
	QID     uint16
	HRQSize uint16 // host receive queue size (1-based): responses we may have outstanding
	HSQSize uint16 // host send queue size, 0-based: HSQSize+1 commands may arrive
	CNTLID  uint16
}

// CMRequestError is a request the target must reject; Reject is the
// status to send in the reject private data.
type CMRequestError struct {
	Reject uint16
	Msg    string
}

func (e *CMRequestError) Error() string { return "nvme: rdma cm request: " + e.Msg }

// ErrCMRequest matches any CMRequestError with errors.Is.
var ErrCMRequest = errors.New("nvme: invalid rdma cm request")

// Is lets errors.Is(err, ErrCMRequest) match.
func (e *CMRequestError) Is(target error) bool { return target == ErrCMRequest }

// ParseCMRequest decodes and checks the private data of a connection
// request. maxQueueSize bounds both queue sizes.
func ParseCMRequest(b []byte, maxQueueSize uint16) (CMRequest, error) {
	var r CMRequest
	if len(b) < CMRequestSize {
		return r, &CMRequestError{CMRejectInvalidLength, "private data too short"}
	}
	r.RecFmt = binary.LittleEndian.Uint16(b[cmReqRecFmt:])
	r.QID = binary.LittleEndian.Uint16(b[cmReqQID:])
	r.HRQSize = binary.LittleEndian.Uint16(b[cmReqHRQSize:])
	r.HSQSize = binary.LittleEndian.Uint16(b[cmReqHSQSize:])
	r.CNTLID = binary.LittleEndian.Uint16(b[cmReqCNTLID:])
	switch {
	case r.RecFmt != 0:
		return r, &CMRequestError{CMRejectInvalidRecFmt, "unsupported record format"}
	case uint32(r.HSQSize)+1 > uint32(maxQueueSize):
		return r, &CMRequestError{CMRejectInvalidHSQSize, "host send queue size out of range"}
	case r.HRQSize == 0 || r.HRQSize > maxQueueSize:
		return r, &CMRequestError{CMRejectInvalidHRQSize, "host receive queue size out of range"}
	}
	return r, nil
}

// Encode writes r into b (at least CMRequestSize bytes), for test hosts.
func (r CMRequest) Encode(b []byte) {
	clear(b[:CMRequestSize])
	binary.LittleEndian.PutUint16(b[cmReqRecFmt:], r.RecFmt)
	binary.LittleEndian.PutUint16(b[cmReqQID:], r.QID)
	binary.LittleEndian.PutUint16(b[cmReqHRQSize:], r.HRQSize)
	binary.LittleEndian.PutUint16(b[cmReqHSQSize:], r.HSQSize)
	binary.LittleEndian.PutUint16(b[cmReqCNTLID:], r.CNTLID)
}

// RecvDepth is how many command capsules the host may have outstanding.
func (r CMRequest) RecvDepth() int { return int(r.HSQSize) + 1 }

// PutCMAccept writes the accept private data: record format 0 and the
// controller receive queue size (RecvDepth).
func PutCMAccept(b []byte, crqsize uint16) {
	clear(b[:CMAcceptSize])
	binary.LittleEndian.PutUint16(b[cmAccRecFmt:], 0)
	binary.LittleEndian.PutUint16(b[cmAccCRQSize:], crqsize)
}

// PutCMReject writes the reject private data.
func PutCMReject(b []byte, status uint16) {
	binary.LittleEndian.PutUint16(b[cmRejRecFmt:], 0)
	binary.LittleEndian.PutUint16(b[cmRejStatus:], status)
}
