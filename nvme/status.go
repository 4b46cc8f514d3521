package nvme

import "fmt"

// Status is a completion status: the Status Code Type in bits 8-10 and the
// Status Code in bits 0-7, with DNR (do not retry) in bit 14, the layout the
// Linux host uses. The completion queue entry carries it shifted left by one
// (bit 0 is the phase tag).
type Status uint16

// DNR marks a status the host should not retry.
const DNR Status = 0x4000

// Status code types.
const (
	SCTGeneric         = 0x0
	SCTCommandSpecific = 0x1
	SCTMedia           = 0x2
	SCTPath            = 0x3
)

// Generic command status (SCT 0).
const (
	StatusSuccess              Status = 0x00
	StatusInvalidOpcode        Status = 0x01
	StatusInvalidField         Status = 0x02
	StatusCIDConflict          Status = 0x03
	StatusDataTransferError    Status = 0x04
	StatusInternal             Status = 0x06
	StatusAbortRequested       Status = 0x07
	StatusAbortSQDeleted       Status = 0x08
	StatusFusedFail            Status = 0x09
	StatusFusedMissing         Status = 0x0a
	StatusInvalidNamespace     Status = 0x0b
	StatusCommandSequence      Status = 0x0c
	StatusSGLInvalidLast       Status = 0x0d
	StatusSGLInvalidCount      Status = 0x0e
	StatusSGLInvalidData       Status = 0x0f // Data SGL Length Invalid
	StatusSGLInvalidMetadata   Status = 0x10
	StatusSGLInvalidType       Status = 0x11 // SGL Descriptor Type Invalid
	StatusSGLInvalidOffset     Status = 0x16
	StatusSGLInvalidSubtype    Status = 0x17
	StatusHostIDInconsistent   Status = 0x18
	StatusPreemptAborted       Status = 0x1b // Command Aborted due to Preempt and Abort
	StatusKeepAliveExpired     Status = 0x19
	StatusKeepAliveInvalid     Status = 0x1a
	StatusTransientTransport   Status = 0x22 // the transport lost or damaged data: the host retries
	StatusNamespaceWriteProt   Status = 0x20
	StatusCommandInterrupted   Status = 0x21
	StatusLBARange             Status = 0x80
	StatusCapacityExceeded     Status = 0x81
	StatusNamespaceNotReady    Status = 0x82
	StatusReservationConflict  Status = 0x83
	StatusFormatInProgress     Status = 0x84
	StatusInvalidQueueID       Status = 0x101
	StatusInvalidQueueSize     Status = 0x102
	StatusAbortLimit           Status = 0x103
	StatusAsyncLimit           Status = 0x105
	StatusInvalidLogPage       Status = 0x109
	StatusFeatureNotSaveable   Status = 0x10d
	StatusFeatureNotChangeable Status = 0x10e
	StatusFeatureNotPerNS      Status = 0x10f
	StatusConflictingAttrs     Status = 0x180
	StatusWriteFault           Status = 0x280
	StatusReadError            Status = 0x281
	StatusCompareFailed        Status = 0x285
	StatusAccessDenied         Status = 0x286
)

// Fabrics command specific status (SCT 1).
const (
	StatusConnectIncompatibleFormat Status = 0x180
	StatusConnectControllerBusy     Status = 0x181
	StatusConnectInvalidParam       Status = 0x182
	StatusConnectRestartDiscovery   Status = 0x183
	StatusConnectInvalidHost        Status = 0x184
)

// Path related status (SCT 3): the namespace cannot be reached through
// this controller now; the host retries on another path.
const (
	StatusANAPersistentLoss Status = 0x301
	StatusANAInaccessible   Status = 0x302
	StatusANATransition     Status = 0x303
)

// Type is the Status Code Type.
func (s Status) Type() uint8 { return uint8(s>>statusSCTShift) & statusSCTMask }

// The status field (without the phase tag): SC in bits 7:0, SCT in 10:8.
// StatusCodeTypes is how many values SCT can take, for counters by type.
const (
	statusSCTShift  = 8
	statusSCTMask   = 0x7
	StatusCodeTypes = statusSCTMask + 1
)

// Code is the Status Code.
func (s Status) Code() uint8 { return uint8(s) }

// Success reports whether s (ignoring DNR) is Successful Completion.
func (s Status) Success() bool { return s&^DNR == 0 }

func (s Status) String() string {
	return fmt.Sprintf("sct=%#x sc=%#02x dnr=%t", s.Type(), s.Code(), s&DNR != 0)
}
