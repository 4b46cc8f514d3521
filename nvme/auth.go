package nvme

import (
	"encoding/binary"
	"errors"
)

// In-band authentication (NVMe Base 2.0 §8.13, TP 8006): the
// Authentication Send and Receive commands carry DH-HMAC-CHAP messages.
// Unlike the views elsewhere in this package, messages decode into structs:
// a few per connection, off the I/O path, each length checked against the
// data before it is used. Layouts follow Linux's struct
// nvmf_auth_dhchap_*_data (include/linux/nvme.h).

// Authentication Send/Receive submission entry fields (NVMe-oF
// "Authentication Send Command"): SPSP0 and SPSP1 name the protocol's
// sub-protocol, SECP the security protocol, and TL (Send) or AL (Receive)
// the transfer length.
const (
	authSPSP0  = 41
	authSPSP1  = 42
	authSECP   = 43
	authLength = 44
)

// AuthSECPDHCHAP is the security protocol of NVMe in-band authentication,
// and AuthSPSP the value both SPSP bytes carry for DH-HMAC-CHAP.
const (
	AuthSECPDHCHAP = 0xe9
	AuthSPSP       = 0x01
)

// AuthSECP is the security protocol of Authentication Send/Receive.
func (c Command) AuthSECP() uint8 { return c[authSECP] }

// AuthSPSP returns SPSP0 and SPSP1.
func (c Command) AuthSPSP() (uint8, uint8) { return c[authSPSP0], c[authSPSP1] }

// AuthLength is TL of Authentication Send or AL of Authentication Receive.
func (c Command) AuthLength() uint32 { return binary.LittleEndian.Uint32(c[authLength:]) }

// SetAuth fills an Authentication Send (send) or Receive command for
// DH-HMAC-CHAP with transfer length n.
func (c Command) SetAuth(send bool, n uint32) {
	c[cmdOpcode] = OpFabrics
	c[cmdFabricsType] = FabricsAuthRecv
	if send {
		c[cmdFabricsType] = FabricsAuthSend
	}
	c[authSPSP0], c[authSPSP1], c[authSECP] = AuthSPSP, AuthSPSP, AuthSECPDHCHAP
	binary.LittleEndian.PutUint32(c[authLength:], n)
}

// AUTHREQ bits of the Connect response's DW0: ATR asks the host to
// authenticate; ASCR asks for a secure channel (not offered here).
const (
	ConnectAuthReqATR  = 1 << 17
	ConnectAuthReqASCR = 1 << 18
)

// StatusAuthRequired (SCT 1, SC 91h) fails a command on a queue that has
// not authenticated yet.
const StatusAuthRequired Status = 0x191

// Message types: AUTH_Type in byte 0 and AUTH_Id in byte 1.
const (
	AuthTypeCommon = 0x00 // Negotiate, Failure1, Failure2
	AuthTypeDHCHAP = 0x01 // Challenge, Reply, Success1, Success2

	AuthNegotiate = 0x00
	AuthChallenge = 0x01
	AuthReply     = 0x02
	AuthSuccess1  = 0x03
	AuthSuccess2  = 0x04
	AuthFailure2  = 0xf0
	AuthFailure1  = 0xf1
)

// AuthIDDHCHAP is the AUTHID of a DH-HMAC-CHAP protocol descriptor.
const AuthIDDHCHAP = 0x01

// Hash function identifiers (HashID).
const (
	HashSHA256 = 0x01
	HashSHA384 = 0x02
	HashSHA512 = 0x03
)

// Diffie-Hellman group identifiers (DHgID): null, then RFC 7919's.
const (
	DHGroupNull = 0x00
	DHGroup2048 = 0x01
	DHGroup3072 = 0x02
	DHGroup4096 = 0x03
	DHGroup6144 = 0x04
	DHGroup8192 = 0x05
)

// Failure reason code explanations (AUTH_Failure1/2 byte 7); the reason
// code itself (byte 6) is always AuthFailureReasonFailed.
const (
	AuthFailureReasonFailed = 0x01

	AuthFailed           = 0x01 // authentication failed (wrong response)
	AuthNotUsable        = 0x02 // authentication protocol not usable
	AuthConcatMismatch   = 0x03 // secure channel concatenation mismatch
	AuthHashUnusable     = 0x04 // hash function not usable
	AuthDHGroupUnusable  = 0x05 // DH group not usable
	AuthIncorrectPayload = 0x06
	AuthIncorrectMessage = 0x07 // out of sequence
)

// SC_C of AUTH_Negotiate: secure channel concatenation; 0 is none.
const AuthNoSecureChannel = 0x00

// Message layouts. Every message starts AUTH_Type, AUTH_Id, two reserved
// bytes and the transaction ID (T_ID).
const (
	authType = 0
	authID   = 1
	authTID  = 4

	// AUTH_Negotiate: SC_C, NAPD, then NAPD 64-byte protocol descriptors.
	negSCC  = 6
	negNAPD = 7
	// AuthNegotiateHeader is the size of AUTH_Negotiate before its
	// descriptors, and AuthDescriptorSize that of each descriptor.
	AuthNegotiateHeader = 8
	AuthDescriptorSize  = 64
	descAuthID          = 0
	descHALen           = 2
	descDHLen           = 3
	descHashes          = 4
	descGroups          = 34
	// AuthMaxIDs is how many hash or group IDs a descriptor holds.
	AuthMaxIDs = 30

	// Challenge, Reply and Success1 have 16-byte headers: HL at 6, then
	// HashID/DHgID/DHVLEN/SEQNUM (Challenge), CVALID/DHVLEN/SEQNUM
	// (Reply) or RVALID (Success1).
	AuthDHCHAPHeader = 16
	chalHL           = 6
	chalHashID       = 8
	chalDHGroup      = 9
	chalDHVLen       = 10
	chalSeq          = 12
	replyCValid      = 8
	succ1RValid      = 8

	// AuthSuccess2Size is the whole AUTH_Success2 message, and
	// AuthFailureSize that of AUTH_Failure1/2.
	AuthSuccess2Size = 16
	AuthFailureSize  = 8
	failReason       = 6
	failExplanation  = 7
)

// ErrAuthMessage reports an authentication message that cannot be decoded.
var ErrAuthMessage = errors.New("nvme: malformed authentication message")

// AuthHeader returns AUTH_Type, AUTH_Id and T_ID of a message.
func AuthHeader(b []byte) (typ, id uint8, tid uint16, err error) {
	if len(b) < authTID+2 {
		return 0, 0, 0, ErrAuthMessage
	}
	return b[authType], b[authID], binary.LittleEndian.Uint16(b[authTID:]), nil
}

func putAuthHeader(b []byte, typ, id uint8, tid uint16) {
	b[authType], b[authID] = typ, id
	binary.LittleEndian.PutUint16(b[authTID:], tid)
}

// AuthNegotiateMsg is AUTH_Negotiate with its one DH-HMAC-CHAP descriptor
// (the only protocol defined): the hashes and groups the host offers, in
// its order of preference.
type AuthNegotiateMsg struct {
	TID      uint16
	SCC      uint8
	NAPD     uint8 // protocol descriptors; a host sends 1
	AuthID   uint8 // of the first descriptor
	Hashes   []uint8
	DHGroups []uint8
}

// ParseAuthNegotiate decodes AUTH_Negotiate. It checks lengths only; what
// the values mean is the controller's to judge.
func ParseAuthNegotiate(b []byte) (AuthNegotiateMsg, error) {
	var m AuthNegotiateMsg
	if len(b) < AuthNegotiateHeader+AuthDescriptorSize || b[authType] != AuthTypeCommon || b[authID] != AuthNegotiate {
		return m, ErrAuthMessage
	}
	m.TID = binary.LittleEndian.Uint16(b[authTID:])
	m.SCC, m.NAPD = b[negSCC], b[negNAPD]
	d := b[AuthNegotiateHeader : AuthNegotiateHeader+AuthDescriptorSize]
	m.AuthID = d[descAuthID]
	ha, dh := int(d[descHALen]), int(d[descDHLen])
	if ha > AuthMaxIDs || dh > AuthMaxIDs {
		return m, ErrAuthMessage
	}
	m.Hashes = append([]uint8(nil), d[descHashes:descHashes+ha]...)
	m.DHGroups = append([]uint8(nil), d[descGroups:descGroups+dh]...)
	return m, nil
}

// Encode builds the message (at most AuthMaxIDs of each list), for hosts in tests.
func (m AuthNegotiateMsg) Encode() []byte {
	b := make([]byte, AuthNegotiateHeader+AuthDescriptorSize)
	putAuthHeader(b, AuthTypeCommon, AuthNegotiate, m.TID)
	b[negSCC], b[negNAPD] = m.SCC, m.NAPD
	d := b[AuthNegotiateHeader:]
	d[descAuthID] = m.AuthID
	d[descHALen] = byte(copy(d[descHashes:descHashes+AuthMaxIDs], m.Hashes))
	d[descDHLen] = byte(copy(d[descGroups:descGroups+AuthMaxIDs], m.DHGroups))
	return b
}

// AuthChallengeMsg is DH-HMAC-CHAP_Challenge: the controller's challenge
// C1 (HL bytes), sequence number S1, and its DH public value when a group
// was chosen.
type AuthChallengeMsg struct {
	TID     uint16
	HashID  uint8
	DHGroup uint8
	Seq     uint32
	C       []byte
	DHV     []byte
}

// Size is the encoded length.
func (m AuthChallengeMsg) Size() int { return AuthDHCHAPHeader + len(m.C) + len(m.DHV) }

// EncodeTo writes the message into b (at least Size bytes).
func (m AuthChallengeMsg) EncodeTo(b []byte) {
	clear(b[:AuthDHCHAPHeader])
	putAuthHeader(b, AuthTypeDHCHAP, AuthChallenge, m.TID)
	b[chalHL], b[chalHashID], b[chalDHGroup] = byte(len(m.C)), m.HashID, m.DHGroup
	binary.LittleEndian.PutUint16(b[chalDHVLen:], uint16(len(m.DHV)))
	binary.LittleEndian.PutUint32(b[chalSeq:], m.Seq)
	n := copy(b[AuthDHCHAPHeader:], m.C)
	copy(b[AuthDHCHAPHeader+n:], m.DHV)
}

// ParseAuthChallenge decodes DH-HMAC-CHAP_Challenge, for hosts in tests.
func ParseAuthChallenge(b []byte) (AuthChallengeMsg, error) {
	var m AuthChallengeMsg
	if len(b) < AuthDHCHAPHeader || b[authType] != AuthTypeDHCHAP || b[authID] != AuthChallenge {
		return m, ErrAuthMessage
	}
	hl, dhvlen := int(b[chalHL]), int(binary.LittleEndian.Uint16(b[chalDHVLen:]))
	if len(b) < AuthDHCHAPHeader+hl+dhvlen {
		return m, ErrAuthMessage
	}
	m.TID = binary.LittleEndian.Uint16(b[authTID:])
	m.HashID, m.DHGroup = b[chalHashID], b[chalDHGroup]
	m.Seq = binary.LittleEndian.Uint32(b[chalSeq:])
	m.C = append([]byte(nil), b[AuthDHCHAPHeader:AuthDHCHAPHeader+hl]...)
	m.DHV = append([]byte(nil), b[AuthDHCHAPHeader+hl:AuthDHCHAPHeader+hl+dhvlen]...)
	return m, nil
}

// AuthReplyMsg is DH-HMAC-CHAP_Reply: the host's response R1, its
// challenge C2 for the controller when CValid (bidirectional; Seq is S2),
// and its DH public value. The C2 field is on the wire either way.
type AuthReplyMsg struct {
	TID    uint16
	R      []byte
	CValid bool
	C      []byte // len(R) bytes
	Seq    uint32
	DHV    []byte
}

// ParseAuthReply decodes DH-HMAC-CHAP_Reply. The slices alias b.
func ParseAuthReply(b []byte) (AuthReplyMsg, error) {
	var m AuthReplyMsg
	if len(b) < AuthDHCHAPHeader || b[authType] != AuthTypeDHCHAP || b[authID] != AuthReply {
		return m, ErrAuthMessage
	}
	hl, dhvlen := int(b[chalHL]), int(binary.LittleEndian.Uint16(b[chalDHVLen:]))
	if len(b) < AuthDHCHAPHeader+2*hl+dhvlen {
		return m, ErrAuthMessage
	}
	m.TID = binary.LittleEndian.Uint16(b[authTID:])
	m.CValid = b[replyCValid] != 0
	m.Seq = binary.LittleEndian.Uint32(b[chalSeq:])
	p := b[AuthDHCHAPHeader:]
	m.R, m.C, m.DHV = p[:hl:hl], p[hl:2*hl:2*hl], p[2*hl:2*hl+dhvlen:2*hl+dhvlen]
	return m, nil
}

// Encode builds the message, for hosts in tests. C, when shorter than R,
// is padded with zeros.
func (m AuthReplyMsg) Encode() []byte {
	hl := len(m.R)
	b := make([]byte, AuthDHCHAPHeader+2*hl+len(m.DHV))
	putAuthHeader(b, AuthTypeDHCHAP, AuthReply, m.TID)
	b[chalHL] = byte(hl)
	if m.CValid {
		b[replyCValid] = 1
	}
	binary.LittleEndian.PutUint16(b[chalDHVLen:], uint16(len(m.DHV)))
	binary.LittleEndian.PutUint32(b[chalSeq:], m.Seq)
	copy(b[AuthDHCHAPHeader:], m.R)
	copy(b[AuthDHCHAPHeader+hl:AuthDHCHAPHeader+2*hl], m.C)
	copy(b[AuthDHCHAPHeader+2*hl:], m.DHV)
	return b
}

// AuthSuccess1Msg is DH-HMAC-CHAP_Success1: the controller's response R2
// to the host's challenge when RValid (bidirectional). The R2 field, HL
// bytes, is on the wire either way.
type AuthSuccess1Msg struct {
	TID    uint16
	HL     uint8
	RValid bool
	R      []byte
}

// Size is the encoded length.
func (m AuthSuccess1Msg) Size() int { return AuthDHCHAPHeader + int(m.HL) }

// EncodeTo writes the message into b (at least Size bytes).
func (m AuthSuccess1Msg) EncodeTo(b []byte) {
	clear(b[:m.Size()])
	putAuthHeader(b, AuthTypeDHCHAP, AuthSuccess1, m.TID)
	b[chalHL] = m.HL
	if m.RValid {
		b[succ1RValid] = 1
		copy(b[AuthDHCHAPHeader:AuthDHCHAPHeader+int(m.HL)], m.R)
	}
}

// ParseAuthSuccess1 decodes DH-HMAC-CHAP_Success1, for hosts in tests.
func ParseAuthSuccess1(b []byte) (AuthSuccess1Msg, error) {
	var m AuthSuccess1Msg
	if len(b) < AuthDHCHAPHeader || b[authType] != AuthTypeDHCHAP || b[authID] != AuthSuccess1 {
		return m, ErrAuthMessage
	}
	m.TID = binary.LittleEndian.Uint16(b[authTID:])
	m.HL, m.RValid = b[chalHL], b[succ1RValid] != 0
	if len(b) < AuthDHCHAPHeader+int(m.HL) {
		return m, ErrAuthMessage
	}
	m.R = append([]byte(nil), b[AuthDHCHAPHeader:AuthDHCHAPHeader+int(m.HL)]...)
	return m, nil
}

// EncodeAuthSuccess2 builds DH-HMAC-CHAP_Success2, for hosts in tests.
func EncodeAuthSuccess2(tid uint16) []byte {
	b := make([]byte, AuthSuccess2Size)
	putAuthHeader(b, AuthTypeDHCHAP, AuthSuccess2, tid)
	return b
}

// AuthFailureMsg is AUTH_Failure1 (controller to host) or AUTH_Failure2
// (host to controller).
type AuthFailureMsg struct {
	ID          uint8 // AuthFailure1 or AuthFailure2
	TID         uint16
	Reason      uint8
	Explanation uint8
}

// EncodeTo writes the message into b (at least AuthFailureSize bytes).
func (m AuthFailureMsg) EncodeTo(b []byte) {
	clear(b[:AuthFailureSize])
	putAuthHeader(b, AuthTypeCommon, m.ID, m.TID)
	b[failReason], b[failExplanation] = m.Reason, m.Explanation
}

// ParseAuthFailure decodes AUTH_Failure1 or AUTH_Failure2.
func ParseAuthFailure(b []byte) (AuthFailureMsg, error) {
	var m AuthFailureMsg
	if len(b) < AuthFailureSize || b[authType] != AuthTypeCommon ||
		(b[authID] != AuthFailure1 && b[authID] != AuthFailure2) {
		return m, ErrAuthMessage
	}
	m.ID, m.TID = b[authID], binary.LittleEndian.Uint16(b[authTID:])
	m.Reason, m.Explanation = b[failReason], b[failExplanation]
	return m, nil
}
