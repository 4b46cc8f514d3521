package fabrics

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/dhchap"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// The host side of DH-HMAC-CHAP, written from the specification and the
// Linux host (drivers/nvme/host/auth.c) apart from the target's code: it
// computes responses with crypto/hmac directly, so a mistake shared by
// both sides would have to be made twice.

// testSecret is a DHHC-1 secret as the host holds it.
type testSecret struct {
	nn  uint8 // transformation hash
	key []byte
}

func (s testSecret) String() string {
	raw := append(append([]byte(nil), s.key...), 0, 0, 0, 0)
	crc := crc32IEEE(s.key)
	binary.LittleEndian.PutUint32(raw[len(s.key):], crc)
	return fmt.Sprintf("DHHC-1:%02d:%s:", s.nn, base64.StdEncoding.EncodeToString(raw))
}

func crc32IEEE(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			crc = crc>>1 ^ 0xedb88320&-(crc&1)
		}
	}
	return ^crc
}

func newTestSecret(t testing.TB, nn uint8, n int) testSecret {
	s := testSecret{nn: nn, key: make([]byte, n)}
	if _, err := rand.Read(s.key); err != nil {
		t.Fatal(err)
	}
	return s
}

// parsed is the secret as the target is configured with it, through the
// DHHC-1 text an operator would paste.
func (s testSecret) parsed(t testing.TB) *dhchap.Secret {
	t.Helper()
	sec, err := dhchap.ParseSecret(s.String())
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func hostHash(id uint8) func() hash.Hash {
	return map[uint8]func() hash.Hash{nvme.HashSHA256: sha256.New, nvme.HashSHA384: sha512.New384, nvme.HashSHA512: sha512.New}[id]
}

func hmacSum(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// transform is the key transformation of NVMe Base 2.0 §8.13.5.7.
func (s testSecret) transform(nqn string) []byte {
	if s.nn == 0 {
		return s.key
	}
	return hmacSum(hostHash(s.nn), s.key, []byte(nqn), []byte("NVMe-over-Fabrics"))
}

// initiator is a host's authentication settings.
type initiator struct {
	hostNQN, subNQN string
	key             testSecret
	ctrlKey         *testSecret // bidirectional when set
	hashes, groups  []uint8     // offered, in order; nil: all
	tid             uint16
}

// authError is how an authentication ended without success.
type authError struct {
	failure1    bool  // the controller sent AUTH_Failure1
	explanation uint8 // its reason code explanation
	refused     bool  // the host refused the controller's response
	status      nvme.Status
}

func (e *authError) Error() string {
	switch {
	case e.failure1:
		return fmt.Sprintf("AUTH_Failure1, explanation %#x", e.explanation)
	case e.refused:
		return "host refused the controller's response"
	}
	return fmt.Sprintf("command status %v", e.status)
}

func (h *host) authSend(q *LoopQueue, msg []byte) nvme.Status {
	c := newCmd(nvme.OpFabrics)
	c.SetAuth(true, uint32(len(msg)))
	if q.Queue.QID != 0 && len(msg) <= 4096 {
		c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, uint32(len(msg)))
	} else {
		keyed(c, len(msg))
	}
	return h.submit(q, c, msg).Status()
}

func (h *host) authRecv(q *LoopQueue, al int) ([]byte, nvme.Status) {
	c := keyed(newCmd(nvme.OpFabrics), al)
	c.SetAuth(false, uint32(al))
	b := make([]byte, al)
	st := h.submit(q, c, b).Status()
	return b, st
}

// authenticate runs one DH-HMAC-CHAP transaction on q.
func (h *host) authenticate(q *LoopQueue, in initiator) error {
	h.t.Helper()
	hashes, groups := in.hashes, in.groups
	if hashes == nil {
		hashes = []uint8{nvme.HashSHA256, nvme.HashSHA384, nvme.HashSHA512}
	}
	if groups == nil {
		groups = []uint8{0, 1, 2, 3, 4, 5}
	}
	neg := nvme.AuthNegotiateMsg{TID: in.tid, NAPD: 1, AuthID: nvme.AuthIDDHCHAP, Hashes: hashes, DHGroups: groups}
	b, err := h.authExchange(q, neg.Encode())
	if err != nil {
		return err
	}
	ch, err := nvme.ParseAuthChallenge(b)
	if err != nil {
		h.t.Fatalf("challenge: %v (%x)", err, b[:16])
	}
	hl := dhchap.HashLen(ch.HashID)
	if ch.TID != in.tid || !bytes.Contains(hashes, []byte{ch.HashID}) || !bytes.Contains(groups, []byte{ch.DHGroup}) ||
		len(ch.C) != hl || ch.Seq == 0 {
		h.t.Fatalf("challenge %+v does not answer the negotiation", ch)
	}
	H := hostHash(ch.HashID)
	pub, skey := h.dhExchange(ch)
	r1 := hmacSum(H, in.key.transform(in.hostNQN), augmented(H, skey, ch.C), le(ch.Seq, 4), le(uint32(in.tid), 2), []byte{0},
		[]byte("HostHost"), []byte(in.hostNQN), []byte{0}, []byte(in.subNQN))
	reply := nvme.AuthReplyMsg{TID: in.tid, R: r1, DHV: pub}
	var c2 []byte
	s2 := uint32(0x5eed)
	if in.ctrlKey != nil {
		c2 = make([]byte, hl)
		rand.Read(c2)
		reply.CValid, reply.C, reply.Seq = true, c2, s2
	}
	if b, err = h.authExchange(q, reply.Encode()); err != nil {
		return err
	}
	s1, err := nvme.ParseAuthSuccess1(b)
	if err != nil || s1.TID != in.tid || int(s1.HL) != hl {
		h.t.Fatalf("success1 %+v: %v", s1, err)
	}
	if in.ctrlKey == nil {
		if s1.RValid {
			h.t.Fatal("controller response without a challenge")
		}
		return nil
	}
	r2 := hmacSum(H, in.ctrlKey.transform(in.subNQN), augmented(H, skey, c2), le(s2, 4), le(uint32(in.tid), 2), []byte{0},
		[]byte("Controller"), []byte(in.subNQN), []byte{0}, []byte(in.hostNQN))
	if !s1.RValid || !hmac.Equal(r2, s1.R) {
		f := make([]byte, nvme.AuthFailureSize)
		nvme.AuthFailureMsg{ID: nvme.AuthFailure2, TID: in.tid, Reason: nvme.AuthFailureReasonFailed,
			Explanation: nvme.AuthFailed}.EncodeTo(f)
		h.authSend(q, f)
		return &authError{refused: true}
	}
	if st := h.authSend(q, nvme.EncodeAuthSuccess2(in.tid)); st != 0 {
		return &authError{status: st}
	}
	return nil
}

// authExchange sends msg and receives the controller's answer, which is
// an error when it is an AUTH_Failure1.
func (h *host) authExchange(q *LoopQueue, msg []byte) ([]byte, error) {
	if st := h.authSend(q, msg); st != 0 {
		return nil, &authError{status: st}
	}
	b, st := h.authRecv(q, 4096)
	if st != 0 {
		return nil, &authError{status: st}
	}
	if f, err := nvme.ParseAuthFailure(b); err == nil {
		return nil, &authError{failure1: true, explanation: f.Explanation}
	}
	return b, nil
}

// dhExchange answers the challenge's DH value with the host's: it returns
// the host's public value and the session key, nil with the null group.
func (h *host) dhExchange(ch nvme.AuthChallengeMsg) (pub, skey []byte) {
	if ch.DHGroup == nvme.DHGroupNull {
		if len(ch.DHV) != 0 {
			h.t.Fatalf("DH value with the null group")
		}
		return nil, nil
	}
	p := dhchap.GroupByID(ch.DHGroup).P()
	size := (p.BitLen() + 7) / 8
	if len(ch.DHV) != size {
		h.t.Fatalf("DH value of %d bytes for a %d-byte group", len(ch.DHV), size)
	}
	xb := make([]byte, 64)
	rand.Read(xb)
	x := new(big.Int).SetBytes(xb)
	pub = new(big.Int).Exp(big.NewInt(2), x, p).FillBytes(make([]byte, size))
	skey = new(big.Int).Exp(new(big.Int).SetBytes(ch.DHV), x, p).FillBytes(make([]byte, size))
	return pub, skey
}

// augmented is the challenge c augmented with the session key,
// HMAC(H(skey), c), or c itself with no session key (the null group).
func augmented(H func() hash.Hash, skey, c []byte) []byte {
	if skey == nil {
		return c
	}
	d := H()
	d.Write(skey)
	return hmacSum(H, d.Sum(nil), c)
}

// le is v's n low bytes, little-endian.
func le(v uint32, n int) []byte {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, v)
	return b[:n]
}

// authTarget is a target whose subsystem lists testHost with key (and
// ctrlKey) and whose log is kept for inspection.
type authTarget struct {
	tg    *Target
	clock *ManualClock
	p     *Port
	s     *Subsystem
	logs  *bytes.Buffer
}

func newAuthTarget(t *testing.T, key testSecret, ctrlKey *testSecret, pol AuthPolicy) *authTarget {
	t.Helper()
	var buf bytes.Buffer
	logger := logrus.New()
	logger.SetOutput(&buf)
	logger.SetLevel(logrus.DebugLevel)
	tg := NewTarget(logrus.NewEntry(logger))
	p := &Port{ID: 1, Address: netip.MustParseAddr("10.0.0.1"), ServiceID: 4420, InlineDataSize: 8192, MaxQueueSize: 128}
	tg.AddPort(p)
	s := NewSubsystem(testNQN, "", "", false)
	s.AllowHost(testHost)
	ns, _ := NewNamespace(1, newMem(1<<20, 512), false, [16]byte{1})
	s.AddNamespace(ns)
	tg.AddSubsystem(s)
	k := HostKeys{Host: key.parsed(t)}
	if ctrlKey != nil {
		k.Ctrl = ctrlKey.parsed(t)
	}
	s.SetHostKeys(map[string]HostKeys{testHost: k})
	s.SetAuthPolicy(pol)
	clock := &ManualClock{}
	tg.SetClock(clock)
	return &authTarget{tg: tg, clock: clock, p: p, s: s, logs: &buf}
}

// connectAuth connects an admin queue and checks AUTHREQ.
func (at *authTarget) connectAuth(t *testing.T, kato uint32) *host {
	t.Helper()
	h, rsp := connectAdminQueue(t, at.tg, at.p, testNQN, testHost, kato)
	if rsp.Result()&nvme.ConnectAuthReqATR == 0 {
		t.Fatalf("connect result %#x: AUTHREQ.ATR clear for a host with a secret", rsp.Result())
	}
	return h
}

// authenticatedHost connects testHost, authenticates it with key (and
// ctrlKey, bidirectionally, when set), enables its controller and checks
// an I/O queue.
func (at *authTarget) authenticatedHost(t *testing.T, key testSecret, ctrlKey *testSecret) (*host, initiator) {
	t.Helper()
	h := at.connectAuth(t, 0)
	in := initiator{hostNQN: testHost, subNQN: testNQN, key: key, ctrlKey: ctrlKey, tid: 1}
	if err := h.authenticate(h.admin, in); err != nil {
		t.Fatal(err)
	}
	h.enableAndIO(in)
	return h, in
}

// enableAndIO enables the controller and connects an authenticated I/O
// queue, then writes and reads back a block.
func (h *host) enableAndIO(in initiator) {
	h.t.Helper()
	h.setProperty(nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
	h.enableIO(in)
}

// enableIO connects and authenticates I/O queue 1 of an enabled
// controller.
func (h *host) enableIO(in initiator) {
	t := h.t
	t.Helper()
	h.io = NewLoopQueue(h.ctrl().Subsystem.target, h.ctrl().Port, 1, 128)
	rsp := h.submit(h.io, connectCmd(1, 127, 0, true), connectData(testNQN, testHost, h.cntl))
	if rsp.Status() != 0 || rsp.Result()&nvme.ConnectAuthReqATR == 0 {
		t.Fatalf("io connect: %v result %#x", rsp.Status(), rsp.Result())
	}
	buf := make([]byte, 512)
	if st := h.rw(nvme.IORead, 1, 0, 1, buf, false); st != nvme.StatusAuthRequired|nvme.DNR {
		t.Fatalf("read before the I/O queue authenticated: %v", st)
	}
	in.tid++
	if err := h.authenticate(h.io, in); err != nil {
		t.Fatalf("I/O queue: %v", err)
	}
	h.checkIO()
}

func (h *host) checkIO() {
	h.t.Helper()
	data := bytes.Repeat([]byte{0x5a}, 512)
	if st := h.rw(nvme.IOWrite, 1, 3, 1, data, true); st != 0 {
		h.t.Fatalf("write: %v", st)
	}
	got := make([]byte, 512)
	if st := h.rw(nvme.IORead, 1, 3, 1, got, false); st != 0 || !bytes.Equal(got, data) {
		h.t.Fatalf("read: %v", st)
	}
}

func (at *authTarget) failures() map[AuthFailureKey]uint64 { return at.s.Stats.AuthFailures.Counts() }

func TestAuthHashesAndGroups(t *testing.T) {
	type tc struct {
		hash, group uint8
		bidir       bool
	}
	var cases []tc
	for _, h := range dhchap.HashIDs {
		for _, g := range dhchap.GroupIDs {
			cases = append(cases, tc{h, g, false}, tc{h, g, true})
		}
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/%s/bidir=%t", dhchap.HashName(c.hash), dhchap.GroupName(c.group), c.bidir)
		t.Run(name, func(t *testing.T) {
			// Transformation hash and key length vary too.
			key := newTestSecret(t, c.hash%4, []int{32, 48, 64}[c.hash-1])
			var ck *testSecret
			if c.bidir {
				k := newTestSecret(t, (c.hash+1)%4, 32)
				ck = &k
			}
			at := newAuthTarget(t, key, ck, AuthPolicy{Hashes: []uint8{c.hash}, DHGroups: []uint8{c.group}})
			at.authenticatedHost(t, key, ck)
			if len(at.failures()) != 0 {
				t.Fatalf("failures counted: %v", at.failures())
			}
			if !strings.Contains(at.logs.String(), "host authenticated") {
				t.Fatal("no log entry for the authentication")
			}
			at.assertNoSecrets(t, key, ck)
		})
	}
}

// assertNoSecrets checks that the log, at debug level, holds no form of
// a key: DHHC-1 text, raw bytes in hex or base64, or a transformed key.
func (at *authTarget) assertNoSecrets(t *testing.T, keys ...any) {
	t.Helper()
	logs := at.logs.String()
	for _, k := range keys {
		var s testSecret
		switch k := k.(type) {
		case testSecret:
			s = k
		case *testSecret:
			if k == nil {
				continue
			}
			s = *k
		}
		for _, form := range []string{s.String(), fmt.Sprintf("%x", s.key), base64.StdEncoding.EncodeToString(s.key)[:16],
			fmt.Sprintf("%x", s.transform(testHost)), fmt.Sprintf("%x", s.transform(testNQN))} {
			if strings.Contains(logs, form) {
				t.Fatalf("the log holds a secret (%.12s…)", form)
			}
		}
	}
}

func TestAuthWrongKey(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	h := at.connectAuth(t, 0)
	wrong := newTestSecret(t, 1, 32)
	err := h.authenticate(h.admin, initiator{hostNQN: testHost, subNQN: testNQN, key: wrong, tid: 9})
	var ae *authError
	if !errors.As(err, &ae) || !ae.failure1 || ae.explanation != nvme.AuthFailed {
		t.Fatalf("wrong key: %v", err)
	}
	if n := len(at.s.Controllers()); n != 0 {
		t.Fatalf("%d controllers left behind", n)
	}
	if at.failures()[AuthFailureKey{testHost, "wrong_response"}] != 1 {
		t.Fatalf("failures %v", at.failures())
	}
	// The log says what to check, and nothing of the values compared.
	logs := at.logs.String()
	if !strings.Contains(logs, "does not match; check that the host's secret") {
		t.Fatalf("log does not say what to check:\n%s", logs)
	}
	at.assertNoSecrets(t, key, wrong)
	// The same transaction cannot go on: the controller is gone.
	if _, st := h.propertyStatus(false, false, nvme.RegCSTS, 0); st != nvme.StatusAuthRequired|nvme.DNR {
		t.Fatalf("property get after failure: %v", st)
	}
}

// The transformation hash matters: the same key bytes announced with
// another NN are another secret.
func TestAuthWrongTransform(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	h := at.connectAuth(t, 0)
	other := testSecret{nn: 2, key: key.key}
	if err := h.authenticate(h.admin, initiator{hostNQN: testHost, subNQN: testNQN, key: other, tid: 1}); err == nil {
		t.Fatal("accepted a key with another transformation")
	}
}

// A host with a secret that does not authenticate gets nothing but the
// Authentication Required status, on the admin queue, and on an I/O queue
// it cannot even create.
func TestAuthMissing(t *testing.T) {
	key := newTestSecret(t, 0, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	clock := at.clock
	h := at.connectAuth(t, 5000)
	want := nvme.StatusAuthRequired | nvme.DNR
	if _, st := h.propertyStatus(false, true, nvme.RegCAP, 0); st != want {
		t.Fatalf("property get: %v", st)
	}
	if _, st := h.propertyStatus(true, false, nvme.RegCC, nvme.CCEnable); st != want {
		t.Fatalf("property set: %v", st)
	}
	if _, st := h.identify(nvme.CNSController, 0); st != want {
		t.Fatalf("identify: %v", st)
	}
	if st := h.submit(h.admin, newCmd(nvme.AdminKeepAlive), nil).Status(); st != want {
		t.Fatalf("keep alive: %v", st)
	}
	io := NewLoopQueue(at.tg, at.p, 1, 32)
	defer io.Close()
	if st := h.submit(io, connectCmd(1, 31, 0, true), connectData(testNQN, testHost, h.cntl)).Status(); st == 0 {
		t.Fatal("I/O queue connected to an unauthenticated controller")
	}
	// It does not stay for ever: a step late, then one more.
	clock.Advance(2 * authStep)
	if n := len(at.s.Controllers()); n != 0 {
		t.Fatalf("%d controllers after the authentication deadline", n)
	}
	if at.failures()[AuthFailureKey{testHost, "timeout"}] != 1 {
		t.Fatalf("failures %v", at.failures())
	}
}

// A host without a secret connects as before where it is allowed, with
// AUTHREQ clear.
func TestAuthNotRequiredWithoutKey(t *testing.T) {
	at := newAuthTarget(t, newTestSecret(t, 1, 32), nil, AuthPolicy{})
	other := "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000002"
	at.s.AllowHost(other)
	q := NewLoopQueue(at.tg, at.p, 0, 32)
	defer q.Close()
	h := &host{t: t, admin: q}
	rsp := h.submit(q, connectCmd(0, 31, 0, false), connectData(testNQN, other, 0xffff))
	if rsp.Status() != 0 || rsp.Result()&(nvme.ConnectAuthReqATR|nvme.ConnectAuthReqASCR) != 0 {
		t.Fatalf("connect: %v result %#x", rsp.Status(), rsp.Result())
	}
	if _, st := h.propertyStatus(false, true, nvme.RegCAP, 0); st != 0 {
		t.Fatalf("property get: %v", st)
	}
}

// Bidirectional: a controller key the host does not expect makes the host
// refuse, and the controller goes.
func TestAuthWrongControllerKey(t *testing.T) {
	key, ours := newTestSecret(t, 1, 32), newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, &ours, AuthPolicy{})
	h := at.connectAuth(t, 0)
	theirs := newTestSecret(t, 1, 32)
	err := h.authenticate(h.admin, initiator{hostNQN: testHost, subNQN: testNQN, key: key, ctrlKey: &theirs, tid: 3})
	var ae *authError
	if !errors.As(err, &ae) || !ae.refused {
		t.Fatalf("host did not refuse: %v", err)
	}
	if n := len(at.s.Controllers()); n != 0 {
		t.Fatalf("%d controllers left behind", n)
	}
	if at.failures()[AuthFailureKey{testHost, "host_refused_controller"}] != 1 {
		t.Fatalf("failures %v", at.failures())
	}
	at.assertNoSecrets(t, key, ours, theirs)
}

// A host that asks for bidirectional authentication where no controller
// key is configured fails with AUTH_Failure1.
func TestAuthBidirectionalWithoutControllerKey(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	h := at.connectAuth(t, 0)
	ck := newTestSecret(t, 1, 32)
	err := h.authenticate(h.admin, initiator{hostNQN: testHost, subNQN: testNQN, key: key, ctrlKey: &ck, tid: 3})
	var ae *authError
	if !errors.As(err, &ae) || !ae.failure1 || ae.explanation != nvme.AuthFailed {
		t.Fatalf("%v", err)
	}
	if at.failures()[AuthFailureKey{testHost, "no_controller_key"}] != 1 {
		t.Fatalf("failures %v", at.failures())
	}
}

func TestAuthUnusableHashAndGroup(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	for _, c := range []struct {
		pol         AuthPolicy
		offerH      []uint8
		offerG      []uint8
		explanation uint8
		reason      string
	}{
		{AuthPolicy{Hashes: []uint8{nvme.HashSHA512}}, []uint8{nvme.HashSHA256}, nil, nvme.AuthHashUnusable, "hash_unusable"},
		{AuthPolicy{DHGroups: []uint8{nvme.DHGroup3072}}, nil, []uint8{nvme.DHGroupNull, nvme.DHGroup2048}, nvme.AuthDHGroupUnusable, "dhgroup_unusable"},
		{AuthPolicy{}, []uint8{0x7f}, nil, nvme.AuthHashUnusable, "hash_unusable"},
	} {
		t.Run(c.reason, func(t *testing.T) {
			at := newAuthTarget(t, key, nil, c.pol)
			h := at.connectAuth(t, 0)
			err := h.authenticate(h.admin, initiator{hostNQN: testHost, subNQN: testNQN, key: key, hashes: c.offerH, groups: c.offerG, tid: 1})
			var ae *authError
			if !errors.As(err, &ae) || !ae.failure1 || ae.explanation != c.explanation {
				t.Fatalf("%v", err)
			}
			if at.failures()[AuthFailureKey{testHost, c.reason}] != 1 || len(at.s.Controllers()) != 0 {
				t.Fatalf("failures %v, %d controllers", at.failures(), len(at.s.Controllers()))
			}
		})
	}
}

// The subsystem's order of preference picks among what the host offers.
func TestAuthPolicyPreference(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{Hashes: []uint8{nvme.HashSHA384, nvme.HashSHA256},
		DHGroups: []uint8{nvme.DHGroup2048, nvme.DHGroupNull}})
	h := at.connectAuth(t, 0)
	neg := nvme.AuthNegotiateMsg{TID: 1, NAPD: 1, AuthID: 1, Hashes: []uint8{1, 2, 3}, DHGroups: []uint8{0, 1}}
	if st := h.authSend(h.admin, neg.Encode()); st != 0 {
		t.Fatal(st)
	}
	b, _ := h.authRecv(h.admin, 4096)
	ch, err := nvme.ParseAuthChallenge(b)
	if err != nil || ch.HashID != nvme.HashSHA384 || ch.DHGroup != nvme.DHGroup2048 || len(ch.DHV) != 256 {
		t.Fatalf("challenge %+v: %v", ch, err)
	}
}

// A host's own lists narrow the subsystem's, and its order picks; lists
// that leave nothing in common accept nothing.
func TestAuthHostPolicy(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	for _, c := range []struct {
		name        string
		sub, host   AuthPolicy
		hash, group uint8
		explanation uint8 // of the failure, 0 when it succeeds
	}{
		{"host lists only", AuthPolicy{}, AuthPolicy{Hashes: []uint8{nvme.HashSHA512}, DHGroups: []uint8{nvme.DHGroup3072}},
			nvme.HashSHA512, nvme.DHGroup3072, 0},
		{"host order", AuthPolicy{Hashes: []uint8{nvme.HashSHA256, nvme.HashSHA384}},
			AuthPolicy{Hashes: []uint8{nvme.HashSHA384, nvme.HashSHA256}}, nvme.HashSHA384, nvme.DHGroupNull, 0},
		{"no hash in common", AuthPolicy{Hashes: []uint8{nvme.HashSHA384}}, AuthPolicy{Hashes: []uint8{nvme.HashSHA256}},
			0, 0, nvme.AuthHashUnusable},
		{"no group in common", AuthPolicy{DHGroups: []uint8{nvme.DHGroup2048}}, AuthPolicy{DHGroups: []uint8{nvme.DHGroupNull}},
			0, 0, nvme.AuthDHGroupUnusable},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := newAuthTarget(t, key, nil, c.sub)
			at.s.SetHostKeys(map[string]HostKeys{testHost: {Host: key.parsed(t), Policy: c.host}})
			h := at.connectAuth(t, 0)
			neg := nvme.AuthNegotiateMsg{TID: 1, NAPD: 1, AuthID: 1, Hashes: []uint8{1, 2, 3}, DHGroups: []uint8{0, 1, 2, 3, 4, 5}}
			if st := h.authSend(h.admin, neg.Encode()); st != 0 {
				t.Fatal(st)
			}
			b, _ := h.authRecv(h.admin, 4096)
			if c.explanation != 0 {
				f, err := nvme.ParseAuthFailure(b)
				if err != nil || f.Explanation != c.explanation {
					t.Fatalf("want failure %#x, got %+v (%v)", c.explanation, f, err)
				}
				return
			}
			ch, err := nvme.ParseAuthChallenge(b)
			if err != nil || ch.HashID != c.hash || ch.DHGroup != c.group {
				t.Fatalf("challenge %+v: %v", ch, err)
			}
		})
	}
}

// A short KATO still leaves a host authStep per step.
func TestAuthDeadlineFloor(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	h := at.connectAuth(t, 5000)
	at.clock.Advance(authStep - time.Second)
	if err := h.authenticate(h.admin, initiator{hostNQN: testHost, subNQN: testNQN, key: key, tid: 1}); err != nil {
		t.Fatalf("authentication %v after Connect with KATO 5 s: %v", authStep-time.Second, err)
	}
}

// Keep alive starts once the admin queue has authenticated: before, the
// host could not send one.
func TestAuthKeepAliveAfterAuthentication(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	h := at.connectAuth(t, 5000)
	at.clock.Advance(10 * time.Second)
	if err := h.authenticate(h.admin, initiator{hostNQN: testHost, subNQN: testNQN, key: key, tid: 1}); err != nil {
		t.Fatalf("authentication 10 s after Connect with KATO 5 s: %v", err)
	}
	at.clock.Advance(6 * time.Second)
	at.clock.Advance(6 * time.Second) // a period with traffic (the authentication), then one without
	if n := len(at.s.Controllers()); n != 0 {
		t.Fatalf("%d controllers 12 s after authenticating without Keep Alive", n)
	}
	if at.s.Stats.KeepAliveExpired.Load() != 1 {
		t.Fatalf("keep alive expiries %d", at.s.Stats.KeepAliveExpired.Load())
	}
}

// The authentication deadline counts from the host's last authentication
// message, not from Connect: a host slow at its DH arithmetic gets in, one
// that stops talking goes.
func TestAuthDeadlinePerStep(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	neg := nvme.AuthNegotiateMsg{TID: 1, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{1}}
	// Two steps of nearly authStep each are in time.
	h := at.connectAuth(t, 12000)
	at.clock.Advance(authStep - time.Second)
	if st := h.authSend(h.admin, neg.Encode()); st != 0 {
		t.Fatal(st)
	}
	at.clock.Advance(authStep - time.Second)
	if _, st := h.authRecv(h.admin, 4096); st != 0 {
		t.Fatalf("challenge after two steps of nearly a step limit each: %v", st)
	}
	if n := len(at.s.Controllers()); n != 1 {
		t.Fatalf("%d controllers in a transaction that keeps moving", n)
	}
	h.admin.Close() // the host gave up: no failure counted

	// A step limit after the host's last message it is late: it is told
	// so at its next message, and the controller goes.
	h = at.connectAuth(t, 12000)
	at.clock.Advance(time.Second)
	if st := h.authSend(h.admin, neg.Encode()); st != 0 {
		t.Fatal(st)
	}
	at.clock.Advance(authStep)
	if n := len(at.s.Controllers()); n != 1 {
		t.Fatalf("%d controllers a step limit after the host's last message", n)
	}
	reply := nvme.AuthReplyMsg{TID: 1, R: make([]byte, 32), DHV: make([]byte, 256)}
	if st := h.authSend(h.admin, reply.Encode()); st != 0 {
		t.Fatalf("late reply: %v", st)
	}
	b, st := h.authRecv(h.admin, 4096)
	if f, err := nvme.ParseAuthFailure(b); st != 0 || err != nil || f.Explanation != nvme.AuthFailed {
		t.Fatalf("after a late reply: status %v, %+v, %v", st, f, err)
	}
	if n := len(at.s.Controllers()); n != 0 {
		t.Fatalf("%d controllers after the late reply failed", n)
	}
	if at.failures()[AuthFailureKey{testHost, "timeout"}] != 1 {
		t.Fatalf("failures %v", at.failures())
	}
	// The later timers find nothing more to do.
	at.clock.Advance(authTotalMax)
	if at.failures()[AuthFailureKey{testHost, "timeout"}] != 1 {
		t.Fatalf("failures %v after the later timers", at.failures())
	}
}

// A host that stops talking is removed a step after its step ran late.
func TestAuthDeadlineSilentHost(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	h := at.connectAuth(t, 0) // no keep alive
	neg := nvme.AuthNegotiateMsg{TID: 1, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{0}}
	if st := h.authSend(h.admin, neg.Encode()); st != 0 {
		t.Fatal(st)
	}
	at.clock.Advance(authStep)
	if n := len(at.s.Controllers()); n != 1 {
		t.Fatalf("%d controllers one step limit after the last message", n)
	}
	at.clock.Advance(authStep)
	if n := len(at.s.Controllers()); n != 0 {
		t.Fatalf("%d controllers two step limits after the last message", n)
	}
	if at.failures()[AuthFailureKey{testHost, "timeout"}] != 1 {
		t.Fatalf("failures %v", at.failures())
	}
}

// Messages out of turn, a wrong transaction ID, malformed fields: each
// is answered as the specification and the Linux target answer it.
func TestAuthSequenceErrors(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	neg := nvme.AuthNegotiateMsg{TID: 4, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{0}}.Encode()
	reply := nvme.AuthReplyMsg{TID: 4, R: make([]byte, 32)}.Encode()
	for _, c := range []struct {
		name        string
		run         func(h *host) nvme.Status // the last command's status
		explanation uint8                     // 0: no Failure1 expected
		reason      string
	}{
		{"reply before negotiate", func(h *host) nvme.Status { return h.authSend(h.admin, reply) }, nvme.AuthIncorrectMessage, "out_of_sequence"},
		{"receive before negotiate", func(h *host) nvme.Status {
			b, st := h.authRecv(h.admin, 4096)
			if f, err := nvme.ParseAuthFailure(b); err != nil || f.Explanation != nvme.AuthIncorrectMessage {
				h.t.Fatalf("receive out of turn: %x", b[:8])
			}
			return st
		}, nvme.AuthIncorrectMessage, "out_of_sequence"},
		{"reply before the challenge was read", func(h *host) nvme.Status {
			h.authSend(h.admin, neg)
			return h.authSend(h.admin, reply)
		}, nvme.AuthIncorrectMessage, "out_of_sequence"},
		{"wrong transaction ID", func(h *host) nvme.Status {
			h.authSend(h.admin, neg)
			h.authRecv(h.admin, 4096)
			r := nvme.AuthReplyMsg{TID: 5, R: make([]byte, 32)}.Encode()
			return h.authSend(h.admin, r)
		}, nvme.AuthIncorrectPayload, "transaction_id"},
		{"short response", func(h *host) nvme.Status {
			h.authSend(h.admin, neg)
			h.authRecv(h.admin, 4096)
			return h.authSend(h.admin, nvme.AuthReplyMsg{TID: 4, R: make([]byte, 16)}.Encode())
		}, nvme.AuthIncorrectPayload, "malformed_message"},
		{"DH value with the null group", func(h *host) nvme.Status {
			h.authSend(h.admin, neg)
			h.authRecv(h.admin, 4096)
			return h.authSend(h.admin, nvme.AuthReplyMsg{TID: 4, R: make([]byte, 32), DHV: make([]byte, 256)}.Encode())
		}, nvme.AuthIncorrectPayload, "malformed_message"},
		{"success2 after a unidirectional success1", func(h *host) nvme.Status {
			if err := h.authenticate(h.admin, initiator{hostNQN: testHost, subNQN: testNQN, key: key, tid: 4}); err != nil {
				h.t.Fatal(err)
			}
			return h.authSend(h.admin, nvme.EncodeAuthSuccess2(4))
		}, nvme.AuthIncorrectMessage, "out_of_sequence"},
		{"secure channel", func(h *host) nvme.Status {
			return h.authSend(h.admin, nvme.AuthNegotiateMsg{TID: 1, SCC: 1, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{0}}.Encode())
		}, nvme.AuthConcatMismatch, "secure_channel_requested"},
		{"two descriptors", func(h *host) nvme.Status {
			return h.authSend(h.admin, nvme.AuthNegotiateMsg{TID: 1, NAPD: 2, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{0}}.Encode())
		}, nvme.AuthNotUsable, "protocol_not_usable"},
		{"truncated negotiate", func(h *host) nvme.Status { return h.authSend(h.admin, neg[:20]) }, nvme.AuthIncorrectPayload, "malformed_message"},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := newAuthTarget(t, key, nil, AuthPolicy{})
			h := at.connectAuth(t, 0)
			if st := c.run(h); st != 0 {
				t.Fatalf("status %v: the failure is reported by AUTH_Failure1, not the command status", st)
			}
			if c.reason != "out_of_sequence" || !strings.HasPrefix(c.name, "receive") {
				b, st := h.authRecv(h.admin, 4096)
				f, err := nvme.ParseAuthFailure(b)
				if st != 0 || err != nil || f.ID != nvme.AuthFailure1 || f.Explanation != c.explanation ||
					f.Reason != nvme.AuthFailureReasonFailed {
					t.Fatalf("receive: %v %x", st, b[:8])
				}
			}
			if at.failures()[AuthFailureKey{testHost, c.reason}] != 1 || len(at.s.Controllers()) != 0 {
				t.Fatalf("failures %v, %d controllers", at.failures(), len(at.s.Controllers()))
			}
		})
	}
}

// Malformed Authentication Send/Receive fields fail the command itself.
func TestAuthCommandFields(t *testing.T) {
	at := newAuthTarget(t, newTestSecret(t, 1, 32), nil, AuthPolicy{})
	h := at.connectAuth(t, 0)
	want := nvme.StatusInvalidField | nvme.DNR
	for name, mod := range map[string]func(nvme.Command){
		"secp":  func(c nvme.Command) { c[43] = 0xea },
		"spsp0": func(c nvme.Command) { c[41] = 2 },
		"spsp1": func(c nvme.Command) { c[42] = 0 },
		"tl 0":  func(c nvme.Command) { c.SetAuth(true, 0) },
		"huge":  func(c nvme.Command) { c.SetAuth(false, 1<<20) },
	} {
		c := keyed(newCmd(nvme.OpFabrics), 64)
		c.SetAuth(true, 64)
		mod(c)
		if st := h.submit(h.admin, c, make([]byte, 64)).Status(); st != want {
			t.Errorf("%s: %v", name, st)
		}
	}
	// Before Connect there is no controller to authenticate with.
	q := NewLoopQueue(at.tg, at.p, 0, 32)
	defer q.Close()
	c := keyed(newCmd(nvme.OpFabrics), 64)
	c.SetAuth(true, 64)
	if st := h.submit(q, c, make([]byte, 64)).Status(); st != nvme.StatusCommandSequence|nvme.DNR {
		t.Fatalf("before connect: %v", st)
	}
}

// The host re-authenticates on live queues (a new key written to sysfs on
// Linux 6.12 does this): I/O goes on during and after.
func TestAuthReauthentication(t *testing.T) {
	key, ck := newTestSecret(t, 2, 48), newTestSecret(t, 3, 64)
	at := newAuthTarget(t, key, &ck, AuthPolicy{DHGroups: []uint8{nvme.DHGroup2048}})
	h, in := at.authenticatedHost(t, key, &ck)
	for i := range 3 {
		in.tid = uint16(100 + i)
		for _, q := range []*LoopQueue{h.admin, h.io} {
			neg := nvme.AuthNegotiateMsg{TID: in.tid, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{1}}
			h.authSend(q, neg.Encode())
			// Mid-transaction, the queue still serves.
			h.checkIO()
			if err := h.authenticate(q, in); err != nil {
				t.Fatalf("re-authentication %d on queue %d: %v", i, q.Queue.QID, err)
			}
		}
		h.checkIO()
	}
	if !strings.Contains(at.logs.String(), "host re-authenticated") {
		t.Fatal("no log entry for the re-authentication")
	}
	// A failed re-authentication of an I/O queue stops that queue at once
	// and disconnects it after the grace period; the controller stays.
	in.key = newTestSecret(t, 2, 48)
	if err := h.authenticate(h.io, in); err == nil {
		t.Fatal("re-authentication with a wrong key succeeded")
	}
	if st := h.rw(nvme.IORead, 1, 0, 1, make([]byte, 512), false); st != nvme.StatusAuthRequired|nvme.DNR {
		t.Fatalf("read after the failure: %v", st)
	}
	at.clock.Advance(authFailureGrace)
	if !h.io.Disconnected() || h.admin.Disconnected() || len(at.s.Controllers()) != 1 {
		t.Fatal("a failed I/O queue re-authentication did not end just that queue")
	}
	// One of the admin queue ends the controller, and every queue stops at
	// once, before they are disconnected.
	h.io.Close()
	good := in
	good.key = key
	h.enableIO(good)
	in.tid = 200
	if err := h.authenticate(h.admin, in); err == nil {
		t.Fatal("re-authentication with a wrong key succeeded")
	}
	if len(at.s.Controllers()) != 0 {
		t.Fatal("controller kept after a failed re-authentication of its admin queue")
	}
	if st := h.rw(nvme.IORead, 1, 0, 1, make([]byte, 512), false); st != nvme.StatusAuthRequired|nvme.DNR {
		t.Fatalf("read after the failure: %v", st)
	}
	if _, st := h.propertyStatus(false, false, nvme.RegCSTS, 0); st != nvme.StatusAuthRequired|nvme.DNR {
		t.Fatalf("admin command after the failure: %v", st)
	}
	at.clock.Advance(authFailureGrace)
	if !h.admin.Disconnected() || !h.io.Disconnected() {
		t.Fatal("queues still connected after the grace period")
	}
}

// A key changed by reload or the admin socket applies to new
// authentications; connected hosts are not dropped.
func TestAuthKeyRotation(t *testing.T) {
	oldKey := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, oldKey, nil, AuthPolicy{})
	h, in := at.authenticatedHost(t, oldKey, nil)

	newKey := newTestSecret(t, 1, 32)
	at.s.SetHostKeys(map[string]HostKeys{testHost: {Host: newKey.parsed(t)}})
	h.checkIO()
	if h.admin.Disconnected() || h.io.Disconnected() || len(at.s.Controllers()) != 1 {
		t.Fatal("a key change dropped the connected host")
	}
	// New connections need the new key ...
	h2 := at.connectAuth(t, 0)
	if err := h2.authenticate(h2.admin, in); err == nil {
		t.Fatal("a new connection authenticated with the old key")
	}
	h3 := at.connectAuth(t, 0)
	in.key = newKey
	if err := h3.authenticate(h3.admin, in); err != nil {
		t.Fatal(err)
	}
	// ... and so does the connected host when it re-authenticates.
	in.tid = 50
	if err := h.authenticate(h.admin, in); err != nil {
		t.Fatal(err)
	}
	h.checkIO()
}

// A failed authentication removes the controller at once and disconnects
// its queues after a grace period that lets AUTH_Failure1 reach the host.
func TestAuthFailureDisconnects(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	at := newAuthTarget(t, key, nil, AuthPolicy{})
	clock := at.clock
	h := at.connectAuth(t, 0)
	cntl := h.cntl
	if err := h.authenticate(h.admin, initiator{hostNQN: testHost, subNQN: testNQN, key: newTestSecret(t, 1, 32), tid: 1}); err == nil {
		t.Fatal("wrong key accepted")
	}
	if at.s.controller(cntl) != nil || h.admin.Disconnected() {
		t.Fatal("controller still listed, or queue gone before the grace period")
	}
	// No new transaction on the dead controller.
	neg := nvme.AuthNegotiateMsg{TID: 2, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{0}}
	if st := h.authSend(h.admin, neg.Encode()); st != nvme.StatusCommandSequence|nvme.DNR {
		t.Fatalf("negotiate on a removed controller: %v", st)
	}
	clock.Advance(authFailureGrace)
	if !h.admin.Disconnected() {
		t.Fatal("queue still connected after the grace period")
	}
}

// FuzzAuthSend sends arbitrary messages by Authentication Send to a
// controller waiting for its host to authenticate, then asks for the
// answer. Every command completes, the controller never counts as
// authenticated, and a failure leaves no controller behind.
func FuzzAuthSend(f *testing.F) {
	f.Add(nvme.AuthNegotiateMsg{TID: 1, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{1}}.Encode(), true)
	f.Add(nvme.AuthReplyMsg{TID: 1, R: make([]byte, 32), CValid: true, C: make([]byte, 32), Seq: 1}.Encode(), false)
	f.Add(nvme.EncodeAuthSuccess2(1), true)
	f.Add([]byte{0, 0xf0, 0, 0, 1, 0, 1, 1}, false)
	key := newTestSecret(f, 1, 32)
	f.Fuzz(func(t *testing.T, msg []byte, negotiateFirst bool) {
		if len(msg) == 0 || len(msg) > 4096 {
			return
		}
		at := newAuthTarget(t, key, nil, AuthPolicy{})
		h := at.connectAuth(t, 0)
		if negotiateFirst {
			h.authSend(h.admin, nvme.AuthNegotiateMsg{TID: 1, NAPD: 1, AuthID: 1, Hashes: []uint8{1}, DHGroups: []uint8{1}}.Encode())
			h.authRecv(h.admin, 4096)
		}
		h.authSend(h.admin, msg)
		h.authRecv(h.admin, 4096)
		if _, st := h.propertyStatus(false, false, nvme.RegCSTS, 0); st != nvme.StatusAuthRequired|nvme.DNR {
			t.Fatalf("property get after fuzzed authentication: %v", st)
		}
		if f := at.failures(); len(f) != 0 && len(at.s.Controllers()) != 0 {
			t.Fatalf("failure %v left the controller", f)
		}
	})
}
