package nvme

import (
	"bytes"
	"testing"
)

// The authentication decoders face whatever a host sends before it has
// proven anything: they must never read past the data or accept a message
// whose lengths do not fit.

func FuzzParseAuthNegotiate(f *testing.F) {
	f.Add(AuthNegotiateMsg{TID: 1, NAPD: 1, AuthID: AuthIDDHCHAP,
		Hashes: []uint8{HashSHA256, HashSHA384, HashSHA512}, DHGroups: []uint8{0, 1, 2, 3, 4, 5}}.Encode())
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseAuthNegotiate(b)
		if err != nil {
			return
		}
		if len(m.Hashes) > AuthMaxIDs || len(m.DHGroups) > AuthMaxIDs {
			t.Fatalf("%d hashes, %d groups", len(m.Hashes), len(m.DHGroups))
		}
		m2, err := ParseAuthNegotiate(m.Encode())
		if err != nil || m2.TID != m.TID || !bytes.Equal(m2.Hashes, m.Hashes) || !bytes.Equal(m2.DHGroups, m.DHGroups) ||
			m2.SCC != m.SCC || m2.NAPD != m.NAPD || m2.AuthID != m.AuthID {
			t.Fatalf("round trip: %+v -> %+v, %v", m, m2, err)
		}
	})
}

func FuzzParseAuthReply(f *testing.F) {
	f.Add(AuthReplyMsg{TID: 7, R: make([]byte, 32), CValid: true, C: bytes.Repeat([]byte{1}, 32), Seq: 9,
		DHV: make([]byte, 256)}.Encode())
	f.Add([]byte{1, 2, 0, 0, 0, 0, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseAuthReply(b)
		if err != nil {
			return
		}
		if len(m.C) != len(m.R) || AuthDHCHAPHeader+2*len(m.R)+len(m.DHV) > len(b) {
			t.Fatalf("lengths %d %d %d in %d bytes", len(m.R), len(m.C), len(m.DHV), len(b))
		}
		m2, err := ParseAuthReply(m.Encode())
		if err != nil || !bytes.Equal(m2.R, m.R) || !bytes.Equal(m2.C, m.C) || !bytes.Equal(m2.DHV, m.DHV) ||
			m2.Seq != m.Seq || m2.TID != m.TID || m2.CValid != m.CValid {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzParseAuthChallenge(f *testing.F) {
	m := AuthChallengeMsg{TID: 3, HashID: HashSHA384, DHGroup: DHGroup2048, Seq: 5, C: make([]byte, 48), DHV: make([]byte, 256)}
	b := make([]byte, m.Size())
	m.EncodeTo(b)
	f.Add(b)
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseAuthChallenge(b)
		if err != nil {
			return
		}
		if m.Size() > len(b) {
			t.Fatalf("message of %d bytes in %d", m.Size(), len(b))
		}
		out := make([]byte, m.Size())
		m.EncodeTo(out)
		if m2, err := ParseAuthChallenge(out); err != nil || !bytes.Equal(m2.C, m.C) || !bytes.Equal(m2.DHV, m.DHV) ||
			m2.Seq != m.Seq || m2.HashID != m.HashID || m2.DHGroup != m.DHGroup {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzParseAuthSuccess1(f *testing.F) {
	m := AuthSuccess1Msg{TID: 3, HL: 32, RValid: true, R: make([]byte, 32)}
	b := make([]byte, m.Size())
	m.EncodeTo(b)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseAuthSuccess1(b)
		if err != nil {
			return
		}
		if len(m.R) != int(m.HL) || m.Size() > len(b) {
			t.Fatalf("HL %d with %d bytes in %d", m.HL, len(m.R), len(b))
		}
	})
}

func FuzzParseAuthFailure(f *testing.F) {
	b := make([]byte, AuthFailureSize)
	AuthFailureMsg{ID: AuthFailure2, TID: 1, Reason: AuthFailureReasonFailed, Explanation: AuthFailed}.EncodeTo(b)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseAuthFailure(b)
		if err != nil {
			return
		}
		out := make([]byte, AuthFailureSize)
		m.EncodeTo(out)
		if m2, err := ParseAuthFailure(out); err != nil || m2 != m {
			t.Fatalf("round trip %+v -> %+v, %v", m, m2, err)
		}
	})
}

func FuzzAuthHeader(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, _, err := AuthHeader(b); (err == nil) != (len(b) >= 6) {
			t.Fatalf("len %d: %v", len(b), err)
		}
	})
}

func TestAuthCommandFields(t *testing.T) {
	c := make(Command, CommandSize)
	c.SetAuth(true, 72)
	if c.Opcode() != OpFabrics || c.FabricsType() != FabricsAuthSend || c.AuthSECP() != AuthSECPDHCHAP || c.AuthLength() != 72 {
		t.Fatalf("send: %x", []byte(c))
	}
	if s0, s1 := c.AuthSPSP(); s0 != 1 || s1 != 1 {
		t.Fatalf("spsp %d %d", s0, s1)
	}
	// Offsets as in Linux's struct nvmf_auth_send_command.
	if c[41] != 1 || c[42] != 1 || c[43] != 0xe9 || c[44] != 72 {
		t.Fatalf("layout %x", []byte(c[40:48]))
	}
	c.SetAuth(false, 4096)
	if c.FabricsType() != FabricsAuthRecv || c.AuthLength() != 4096 {
		t.Fatalf("receive: %x", []byte(c))
	}
}

// TestAuthLayouts pins the offsets of each message to the structures of
// Linux's include/linux/nvme.h (nvmf_auth_dhchap_*_data).
func TestAuthLayouts(t *testing.T) {
	n := AuthNegotiateMsg{TID: 0x1234, NAPD: 1, AuthID: 1, Hashes: []uint8{1, 2, 3}, DHGroups: []uint8{0, 1}}.Encode()
	if len(n) != 72 || n[4] != 0x34 || n[5] != 0x12 || n[7] != 1 || n[8] != 1 || n[10] != 3 || n[11] != 2 ||
		n[12] != 1 || n[14] != 3 || n[8+34] != 0 || n[8+35] != 1 {
		t.Fatalf("negotiate %x", n)
	}
	ch := AuthChallengeMsg{TID: 2, HashID: 3, DHGroup: 1, Seq: 0x01020304, C: make([]byte, 64), DHV: []byte{0xaa}}
	b := make([]byte, ch.Size())
	ch.EncodeTo(b)
	if b[0] != 1 || b[1] != 1 || b[6] != 64 || b[8] != 3 || b[9] != 1 || b[10] != 1 || b[12] != 4 || b[15] != 1 || b[16+64] != 0xaa {
		t.Fatalf("challenge %x", b[:16])
	}
	r := AuthReplyMsg{TID: 2, R: []byte{1, 2}, CValid: true, C: []byte{3, 4}, Seq: 5, DHV: []byte{6}}.Encode()
	if !bytes.Equal(r, []byte{1, 2, 0, 0, 2, 0, 2, 0, 1, 0, 1, 0, 5, 0, 0, 0, 1, 2, 3, 4, 6}) {
		t.Fatalf("reply %x", r)
	}
	s1 := AuthSuccess1Msg{TID: 2, HL: 2, RValid: true, R: []byte{7, 8}}
	b = make([]byte, s1.Size())
	s1.EncodeTo(b)
	if !bytes.Equal(b, []byte{1, 3, 0, 0, 2, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 8}) {
		t.Fatalf("success1 %x", b)
	}
	if s2 := EncodeAuthSuccess2(2); len(s2) != 16 || s2[0] != 1 || s2[1] != 4 || s2[4] != 2 {
		t.Fatalf("success2 %x", s2)
	}
	b = make([]byte, AuthFailureSize)
	AuthFailureMsg{ID: AuthFailure1, TID: 2, Reason: 1, Explanation: AuthIncorrectMessage}.EncodeTo(b)
	if !bytes.Equal(b, []byte{0, 0xf1, 0, 0, 2, 0, 1, 7}) {
		t.Fatalf("failure1 %x", b)
	}
}
