package fabrics

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"io"
	"maps"
	"math/big"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/dhchap"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tlspsk"
	"github.com/sirupsen/logrus"
)

// In-band authentication, DH-HMAC-CHAP (NVMe Base 2.0 §8.13), controller
// side. A host with a configured secret gets AUTHREQ in every Connect
// response and must then authenticate that queue before anything but
// Connect and Authentication Send/Receive runs on it:
//
//	host                                 controller
//	Send AUTH_Negotiate (T_ID, hashes, groups)  → picks a hash and a group
//	Receive ← DH-HMAC-CHAP_Challenge (C1, S1, DH value)
//	Send DH-HMAC-CHAP_Reply (R1, [C2, S2], DH value) → checks R1
//	Receive ← DH-HMAC-CHAP_Success1 ([R2])
//	Send DH-HMAC-CHAP_Success2             (only when bidirectional)
//
// Any failure is answered with AUTH_Failure1 on the next Receive. On the
// admin queue the controller is removed at once, and its queues are
// disconnected a moment later so that the Failure1 reaches the host first;
// on an I/O queue only that queue goes (authFail says why). The host may
// start again with a new Negotiate at any time (re-authentication): the
// queue keeps working meanwhile, unless that transaction fails. What a
// host without the secret can hold is bounded: authStep per message,
// authTotalMax in all, authMaxAttempts transactions per queue and
// maxPendingAuthPerHost controllers per host NQN.

// HostKeys are the DH-HMAC-CHAP secrets of one allowed host. A host with a
// Host secret must authenticate on every queue; Ctrl, when set, lets the
// host ask the controller to prove it knows Ctrl too (bidirectional).
// Policy narrows the subsystem's hashes and groups for this host alone.
type HostKeys struct {
	Host   *dhchap.Secret
	Ctrl   *dhchap.Secret
	Policy AuthPolicy
	// TLS is the host's configured PSK for NVMe/TCP's secure channel
	// (tls.go), derived the way TLSDerivation names.
	TLS           *tlspsk.ConfiguredPSK
	TLSDerivation tlspsk.Derivation
}

func (k HostKeys) clone() HostKeys {
	cp := func(s *dhchap.Secret) *dhchap.Secret {
		if s == nil {
			return nil
		}
		return &dhchap.Secret{Transform: s.Transform, Key: slices.Clone(s.Key)}
	}
	var psk *tlspsk.ConfiguredPSK
	if k.TLS != nil {
		psk, _ = tlspsk.NewConfiguredPSK(k.TLS.Transform(), k.TLS.Bytes())
	}
	return HostKeys{Host: cp(k.Host), Ctrl: cp(k.Ctrl), Policy: k.Policy.clone(), TLS: psk, TLSDerivation: k.TLSDerivation}
}

func (k HostKeys) clear() {
	k.Host.Clear()
	k.Ctrl.Clear()
	k.TLS.Clear()
}

// AuthPolicy restricts the hashes and DH groups a subsystem (or one of its
// hosts) accepts, in its order of preference: of those the host offers,
// the first listed here is chosen. Nil lists mean every one, SHA-256 and
// the null group first, as the Linux target defaults; an empty, non-nil
// list accepts none.
type AuthPolicy struct {
	Hashes   []uint8
	DHGroups []uint8
}

func (p AuthPolicy) clone() AuthPolicy {
	return AuthPolicy{Hashes: slices.Clone(p.Hashes), DHGroups: slices.Clone(p.DHGroups)}
}

// narrow returns p restricted to the host's lists h, in the host's order.
func (p AuthPolicy) narrow(h AuthPolicy) AuthPolicy {
	pick := func(ours, host []uint8) []uint8 {
		if host == nil {
			return ours
		}
		out := []uint8{}
		for _, id := range host {
			if ours == nil || slices.Contains(ours, id) {
				out = append(out, id)
			}
		}
		return out
	}
	return AuthPolicy{Hashes: pick(p.Hashes, h.Hashes), DHGroups: pick(p.DHGroups, h.DHGroups)}
}

func (p AuthPolicy) hashes() []uint8 {
	if p.Hashes == nil {
		return dhchap.HashIDs
	}
	return p.Hashes
}

func (p AuthPolicy) groups() []uint8 {
	if p.DHGroups == nil {
		return dhchap.GroupIDs
	}
	return p.DHGroups
}

// Timings of authentication.
const (
	// authFailureGrace is how long the queues of a controller whose
	// authentication failed stay up, so the host reads AUTH_Failure1.
	authFailureGrace = time.Second
	// authStep is how long the host may take for each authentication
	// step of an admin queue, whatever its KATO (which may be 49 days)
	// and without keep alive. The first step includes the Linux host's
	// test of the DH algorithm at its first use: 5-6 s for ffdhe8192 in
	// an emulated guest, 27 s on a loaded machine.
	authStep = 30 * time.Second
	// authTotalMax bounds the whole authentication of an admin queue,
	// however many messages the host sends: several times the slowest
	// exchange of the Linux host (ffdhe8192, a few seconds).
	authTotalMax = 60 * time.Second
	// authMaxAttempts bounds the transactions a queue may start
	// (Negotiate) without one succeeding: each may cost the controller a
	// DH key pair and a shared secret, 8.6 ms each for ffdhe8192. A
	// failure ends the controller anyway; this bounds restarts.
	authMaxAttempts = 3
	// maxPendingAuthPerHost bounds a host NQN's controllers that have
	// not authenticated yet, so that a peer claiming it cannot fill
	// max_controllers or run many DH exchanges at once; a host connects
	// one controller per path at a time.
	maxPendingAuthPerHost = 8
	// maxAuthTransfer bounds Authentication Send/Receive data: the
	// largest message (a Reply with an 8192-bit DH value) is 1168 bytes,
	// and hosts receive into 4 KiB.
	maxAuthTransfer = 16 << 10
)

// SetHostKeys replaces the hosts' secrets, by host NQN. Connected
// controllers go on with the secrets they authenticated with; the new ones
// apply to new connections and to the next re-authentication of an admin
// queue. A controller of a host that now has a secret but connected
// without one is ended: it never proved it holds the secret. The
// subsystem owns the secrets passed from then on and clears them when
// they are replaced.
func (s *Subsystem) SetHostKeys(keys map[string]HostKeys) {
	s.mu.Lock()
	old := s.keys
	s.keys = maps.Clone(keys)
	s.mu.Unlock()
	for _, k := range old {
		k.clear()
	}
	s.endUnauthenticated()
}

// Access is who may connect to a subsystem, with their secrets, applied
// in one step by SetAccess.
type Access struct {
	AllowAnyHost bool
	Hosts        []string
	Keys         map[string]HostKeys
	// Refused are hosts refused whatever the allow-list says: their
	// secret could not be read, so letting them in would let them in
	// without one.
	Refused []string
}

// SetAccess replaces the allow-list, the hosts' secrets and the refused
// hosts under one lock, so that no Connect sees a host allowed before its
// secret is in place. Controllers that the new access would refuse, or
// whose host now has a secret they never authenticated with, are ended.
func (s *Subsystem) SetAccess(a Access) {
	s.mu.Lock()
	old := s.keys
	s.keys = maps.Clone(a.Keys)
	s.refused = make(map[string]bool, len(a.Refused))
	for _, h := range a.Refused {
		s.refused[h] = true
	}
	s.AllowAnyHost = a.AllowAnyHost
	s.hosts = make(map[string]bool, len(a.Hosts))
	for _, h := range a.Hosts {
		s.hosts[h] = true
	}
	s.mu.Unlock()
	for _, k := range old {
		k.clear()
	}
	for _, c := range s.Controllers() {
		if !s.HostAllowed(c.HostNQN) {
			c.fatal("host no longer allowed")
		}
	}
	s.endUnauthenticated()
	s.changedDiscovery()
}

// HostRefused reports whether hostNQN is refused because its secret could
// not be read.
func (s *Subsystem) HostRefused(hostNQN string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[hostNQN]
}

// endUnauthenticated ends the controllers that connected without a
// secret their host now has.
func (s *Subsystem) endUnauthenticated() {
	for _, c := range s.Controllers() {
		c.mu.Lock()
		keyless := c.auth.keys.Host == nil
		c.mu.Unlock()
		if keyless && s.AuthRequired(c.HostNQN) {
			c.log.Warn("the host now has a dhchap_key but this controller connected without one; removing the controller")
			c.fatal("host must authenticate")
		}
	}
}

// SetAuthPolicy sets the hashes and groups the subsystem accepts, for
// transactions started from then on.
func (s *Subsystem) SetAuthPolicy(p AuthPolicy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy = p.clone()
}

// AuthRequired reports whether hostNQN has a secret here, so that it must
// authenticate.
func (s *Subsystem) AuthRequired(hostNQN string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[hostNQN].Host != nil
}

// authConfig is what a controller authenticates its host with: copies
// taken at Connect, and again when the host re-authenticates its admin
// queue, so that a reload never changes keys under a transaction.
type authConfig struct {
	keys   HostKeys
	policy AuthPolicy
	listed bool // the host has an entry in the subsystem's keys (metric label)
}

func (s *Subsystem) authConfigFor(hostNQN string) authConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, listed := s.keys[hostNQN]
	return authConfig{keys: k.clone(), policy: s.policy.narrow(k.Policy), listed: listed || s.hosts[hostNQN]}
}

// AuthFailures counts failed authentications by host and reason.
type AuthFailures struct {
	mu sync.Mutex
	m  map[AuthFailureKey]uint64
}

// AuthFailureKey says who failed and why: the host NQN ("unlisted" for a
// host the subsystem does not name, so that the label set stays bounded)
// and a reason such as wrong_response or hash_unusable.
type AuthFailureKey struct {
	Host   string
	Reason string
}

func (a *AuthFailures) add(k AuthFailureKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[AuthFailureKey]uint64{}
	}
	a.m[k]++
}

// Counts returns the failures so far.
func (a *AuthFailures) Counts() map[AuthFailureKey]uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.m)
}

// seqnum is the last sequence number handed out. Like Linux's, it starts
// at a random value and never yields 0, which means "none" on the wire.
var seqnum atomic.Uint32

func init() {
	var b [4]byte
	rand.Read(b[:])
	seqnum.Store(binary.LittleEndian.Uint32(b[:]))
}

func nextSeqnum() uint32 {
	for {
		if v := seqnum.Add(1); v != 0 {
			return v
		}
	}
}

// queueAuth is one queue's authentication state. Messages of a
// transaction with a DH group run on the queue's workers, so that the DH
// arithmetic does not stall the other queues of the poller: mu orders them
// with those that run on the poller. done is read by the poller without it.
type queueAuth struct {
	mu       sync.Mutex
	done     atomic.Bool // authenticated; stays true through a re-authentication
	attempts uint8       // transactions started since the last success
	dropping bool        // an I/O queue that failed: its disconnect is due
	step     uint8       // the message expected next (nvme.AuthNegotiate … AuthFailure1)
	tid      uint16
	// The transaction's choices and material, cleared when it ends.
	hash, group uint8
	s1, s2      uint32
	c1, c2      []byte
	priv        *big.Int
	skey        []byte
	bidir       bool
	explanation uint8 // what AUTH_Failure1 carries
}

// reset ends the transaction and clears what it derived. Called with
// a.mu held.
func (a *queueAuth) reset() {
	clear(a.c1)
	clear(a.c2)
	clear(a.skey)
	dhchap.ClearInt(a.priv)
	a.step, a.tid, a.hash, a.group, a.s1, a.s2 = 0, 0, 0, 0, 0, 0
	a.c1, a.c2, a.priv, a.skey, a.bidir, a.explanation = nil, nil, nil, nil, false, 0
}

// end clears the transaction when the queue goes, after any message of it
// still running on a worker.
func (a *queueAuth) end() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reset()
}

// dhRand is where DH private values come from; tests make it wait.
var dhRand io.Reader = rand.Reader

// authExempt reports whether cmd may run on a queue that has not
// authenticated: Connect and the authentication commands only.
func authExempt(cmd nvme.Command) bool {
	if cmd.Opcode() != nvme.OpFabrics {
		return false
	}
	switch cmd.FabricsType() {
	case nvme.FabricsConnect, nvme.FabricsAuthSend, nvme.FabricsAuthRecv:
		return true
	}
	return false
}

// authorized reports whether q may run commands: it authenticated, and
// no queue of its controller failed authentication since.
func (q *Queue) authorized() bool {
	return q.auth.done.Load() && !q.ctrl.authRevoked.Load()
}

// requireAuth arms q for authentication after a Connect; the caller sets
// AUTHREQ in the response.
func (q *Queue) requireAuth() {
	q.auth = &queueAuth{}
}

// prepareAuth checks the fields of Authentication Send and Receive as the
// Linux target does, and sizes the transfer.
func (q *Queue) prepareAuth(r *Request) nvme.Status {
	cmd := r.Cmd
	s0, s1 := cmd.AuthSPSP()
	n := cmd.AuthLength()
	if cmd.AuthSECP() != nvme.AuthSECPDHCHAP || s0 != nvme.AuthSPSP || s1 != nvme.AuthSPSP || n == 0 || n > maxAuthTransfer {
		return nvme.StatusInvalidField | nvme.DNR
	}
	if q.auth == nil {
		// A host without a secret may still try; it fails at the Reply.
		q.auth = &queueAuth{}
		q.auth.done.Store(true)
	}
	a := q.auth
	a.mu.Lock()
	r.blocking = a.group != nvme.DHGroupNull
	a.mu.Unlock()
	r.Len = n
	if cmd.FabricsType() == nvme.FabricsAuthSend {
		r.Dir, r.handler = DirHostToCtrl, execAuthSend
	} else {
		r.Dir, r.handler = DirCtrlToHost, execAuthRecv
	}
	return 0
}

func execAuthSend(q *Queue, r *Request) bool {
	a, c := q.auth, q.ctrl
	a.mu.Lock()
	defer a.mu.Unlock()
	if q.lateAuthStep() {
		return true
	}
	if c.isDead() {
		r.status = nvme.StatusCommandSequence | nvme.DNR
		return true
	}
	typ, id, tid, err := nvme.AuthHeader(r.Data)
	switch {
	case err != nil:
		q.authFail(nvme.AuthIncorrectPayload, "malformed_message")
	case typ == nvme.AuthTypeCommon && id == nvme.AuthNegotiate:
		q.authNegotiate(r.Data)
	case typ == nvme.AuthTypeCommon && id == nvme.AuthFailure2 && a.step == nvme.AuthSuccess2:
		q.authFail(nvme.AuthFailed, "host_refused_controller")
	case typ != nvme.AuthTypeDHCHAP || id != a.step:
		q.authFail(nvme.AuthIncorrectMessage, "out_of_sequence")
	case tid != a.tid:
		q.authFail(nvme.AuthIncorrectPayload, "transaction_id")
	case id == nvme.AuthReply:
		q.authReply(r.Data)
	case id == nvme.AuthSuccess2:
		q.authDone()
	}
	return true
}

func execAuthRecv(q *Queue, r *Request) bool {
	a, b := q.auth, r.Data
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(b)
	q.lateAuthStep() // a late step is answered with AUTH_Failure1 below
	if q.ctrl.isDead() && a.step != nvme.AuthFailure1 {
		r.status = nvme.StatusCommandSequence | nvme.DNR
		return true
	}
	switch a.step {
	case nvme.AuthChallenge:
		r.status = q.authChallenge(b)
		return true
	case nvme.AuthSuccess1:
		m := nvme.AuthSuccess1Msg{TID: a.tid, HL: uint8(dhchap.HashLen(a.hash)), RValid: a.bidir}
		if len(b) < m.Size() {
			r.status = nvme.StatusInvalidField | nvme.DNR
			return true
		}
		if a.bidir {
			m.R = q.controllerResponse()
		}
		m.EncodeTo(b)
		clear(m.R)
		if a.bidir {
			a.step = nvme.AuthSuccess2
		} else {
			a.reset()
		}
		return true
	case nvme.AuthFailure1:
	default:
		// The host asked for a message out of turn.
		q.authFail(nvme.AuthIncorrectMessage, "out_of_sequence")
	}
	if len(b) < nvme.AuthFailureSize {
		r.status = nvme.StatusInvalidField | nvme.DNR
		return true
	}
	nvme.AuthFailureMsg{ID: nvme.AuthFailure1, TID: a.tid, Reason: nvme.AuthFailureReasonFailed,
		Explanation: a.explanation}.EncodeTo(b)
	return true
}

// authNegotiate starts a transaction: the hash and the group are the first
// of the subsystem's lists (narrowed by the host's own) that the host offers.
func (q *Queue) authNegotiate(d []byte) {
	a, c := q.auth, q.ctrl
	a.reset()
	m, err := nvme.ParseAuthNegotiate(d)
	a.tid = m.TID
	if err != nil {
		q.authFail(nvme.AuthIncorrectPayload, "malformed_message")
		return
	}
	if a.attempts++; a.attempts > authMaxAttempts {
		q.log.WithField("limit", authMaxAttempts).Warn("authentication failed: the host restarted authentication too often without succeeding")
		q.authFail(nvme.AuthFailed, "too_many_attempts")
		return
	}
	if q.QID == 0 {
		c.refreshAuth()
	}
	if m.SCC != nvme.AuthNoSecureChannel {
		q.authFail(nvme.AuthConcatMismatch, "secure_channel_requested")
		return
	}
	if m.NAPD != 1 || m.AuthID != nvme.AuthIDDHCHAP {
		q.authFail(nvme.AuthNotUsable, "protocol_not_usable")
		return
	}
	pol := c.authPolicy()
	hash, ok := firstOffered(pol.hashes(), m.Hashes)
	if !ok {
		q.log.WithField("offered", namesOf(m.Hashes, dhchap.HashName)).Warn("authentication failed: the host offers no hash the subsystem accepts; check dhchap_hashes (the subsystem's and the host's)")
		q.authFail(nvme.AuthHashUnusable, "hash_unusable")
		return
	}
	group, ok := firstOffered(pol.groups(), m.DHGroups)
	if !ok {
		q.log.WithField("offered", namesOf(m.DHGroups, dhchap.GroupName)).Warn("authentication failed: the host offers no DH group the subsystem accepts; check dhchap_dhgroups (the subsystem's and the host's)")
		q.authFail(nvme.AuthDHGroupUnusable, "dhgroup_unusable")
		return
	}
	a.hash, a.group, a.step = hash, group, nvme.AuthChallenge
}

func firstOffered(ours, offered []uint8) (uint8, bool) {
	for _, id := range ours {
		if slices.Contains(offered, id) {
			return id, true
		}
	}
	return 0, false
}

// authChallenge writes DH-HMAC-CHAP_Challenge: a fresh C1 and S1, and a
// fresh DH key pair when a group was chosen.
func (q *Queue) authChallenge(b []byte) nvme.Status {
	a := q.auth
	hl := dhchap.HashLen(a.hash)
	m := nvme.AuthChallengeMsg{TID: a.tid, HashID: a.hash, DHGroup: a.group, C: make([]byte, hl)}
	g := dhchap.GroupByID(a.group)
	if g != nil {
		m.DHV = make([]byte, g.Size())
	}
	if len(b) < m.Size() {
		return nvme.StatusInvalidField | nvme.DNR
	}
	if _, err := rand.Read(m.C); err != nil {
		return nvme.StatusInternal
	}
	if g != nil {
		priv, pub, err := g.GenerateKey(dhRand)
		if err != nil {
			return nvme.StatusInternal
		}
		a.priv, m.DHV = priv, pub
	}
	a.c1, a.s1 = m.C, nextSeqnum()
	m.Seq = a.s1
	m.EncodeTo(b)
	a.step = nvme.AuthReply
	return 0
}

// authReply checks the host's response R1 in constant time and takes its
// challenge C2 when it asks the controller to authenticate too.
func (q *Queue) authReply(d []byte) {
	a, c := q.auth, q.ctrl
	m, err := nvme.ParseAuthReply(d)
	hl := dhchap.HashLen(a.hash)
	if err != nil || len(m.R) != hl {
		q.authFail(nvme.AuthIncorrectPayload, "malformed_message")
		return
	}
	g := dhchap.GroupByID(a.group)
	switch {
	case g == nil && len(m.DHV) != 0, g != nil && len(m.DHV) == 0:
		q.authFail(nvme.AuthIncorrectPayload, "malformed_message")
		return
	case g != nil:
		skey, err := g.SharedSecret(a.priv, m.DHV)
		dhchap.ClearInt(a.priv)
		a.priv = nil
		if err != nil {
			q.log.Warn("authentication failed: the host's DH value is not in the group; check the host's nvme-cli and kernel")
			q.authFail(nvme.AuthDHGroupUnusable, "dh_value_invalid")
			return
		}
		a.skey = skey
	}
	hostKey := c.transformedKey(false)
	if hostKey == nil {
		q.log.Warn("authentication failed: no dhchap_key is configured for this host, yet it tried to authenticate")
		q.authFail(nvme.AuthFailed, "no_host_key")
		return
	}
	chal := q.challenge(a.c1)
	want := dhchap.HostResponse(a.hash, hostKey, chal, a.s1, a.tid, 0, c.HostNQN, c.Subsystem.NQN)
	clear(hostKey)
	clear(chal)
	ok := hmac.Equal(want, m.R)
	clear(want)
	if !ok {
		q.log.Warn("authentication failed: the host's response does not match; check that the host's secret (nvme connect --dhchap-secret) is this host's dhchap_key")
		q.authFail(nvme.AuthFailed, "wrong_response")
		return
	}
	if m.CValid && m.Seq != 0 {
		// Bidirectional: the controller answers C2 in Success1.
		ck := c.transformedKey(true)
		if ck == nil {
			q.log.Warn("authentication failed: the host asks the controller to authenticate (bidirectional) but no dhchap_ctrl_key is configured for it")
			q.authFail(nvme.AuthFailed, "no_controller_key")
			return
		}
		clear(ck)
		a.bidir, a.c2, a.s2 = true, slices.Clone(m.C), m.Seq
	} else {
		q.authSucceeded(false)
	}
	a.step = nvme.AuthSuccess1
}

// challenge is the challenge a response covers: augmented with the
// session key when a DH group is in use. The caller clears it (C1 and C2
// are used once).
func (q *Queue) challenge(c []byte) []byte {
	a := q.auth
	if a.skey == nil {
		return c
	}
	return dhchap.AugmentChallenge(a.hash, a.skey, c)
}

// controllerResponse computes R2 for Success1.
func (q *Queue) controllerResponse() []byte {
	a, c := q.auth, q.ctrl
	key := c.transformedKey(true)
	chal := q.challenge(a.c2)
	r := dhchap.ControllerResponse(a.hash, key, chal, a.s2, a.tid, 0, c.Subsystem.NQN, c.HostNQN)
	clear(key)
	clear(chal)
	return r
}

// authDone ends a bidirectional transaction at Success2.
func (q *Queue) authDone() {
	q.authSucceeded(true)
	q.auth.reset()
}

func (q *Queue) authSucceeded(bidir bool) {
	a := q.auth
	first := !a.done.Swap(true)
	a.attempts = 0
	if q.QID == 0 && !q.ctrl.authenticated.Swap(true) {
		q.ctrl.keepAlive() // its first chance to send one
	}
	log := q.log.WithFields(logrus.Fields{"hash": dhchap.HashName(a.hash), "dhgroup": dhchap.GroupName(a.group),
		"bidirectional": bidir})
	if first {
		log.Info("host authenticated")
	} else {
		log.Info("host re-authenticated")
	}
}

// authFail ends the transaction: the next Receive gets AUTH_Failure1 with
// explanation, the failure is counted, and the queue stops at once. A
// failure on the admin queue ends the controller (a failed
// re-authentication included, as on the Linux target); one on an I/O
// queue disconnects only that queue. Unlike the Linux target: a peer that
// knows the host NQN, host ID and controller ID, but not the secret, can
// connect an I/O queue of its own to that controller, and failing there
// must not end the host's authenticated controller (SPDK also drops only
// the queue pair).
func (q *Queue) authFail(explanation uint8, reason string) {
	a, c := q.auth, q.ctrl
	tid := a.tid
	a.reset()
	a.done.Store(false)
	a.tid, a.step, a.explanation = tid, nvme.AuthFailure1, explanation
	c.countAuthFailure(reason)
	if q.QID != 0 {
		if !a.dropping {
			a.dropping = true
			q.log.WithField("reason", reason).Warn("authentication failed; disconnecting the I/O queue")
			q.target.clock.AfterFunc(authFailureGrace, q.tr.Disconnect)
		}
		return
	}
	// Every queue of the controller stops at once, not when it is
	// disconnected.
	c.authRevoked.Store(true)
	q.log.WithField("reason", reason).Warn("authentication failed; removing the controller")
	c.endAfter("authentication failed", authFailureGrace)
}

// armIOAuthDeadline disconnects an I/O queue that has not authenticated
// within authTotalMax of its Connect, so that a peer without the secret
// cannot hold one of the controller's queue IDs.
func (q *Queue) armIOAuthDeadline() {
	a := q.auth
	q.target.clock.AfterFunc(authTotalMax, func() {
		if !a.done.Load() {
			q.log.WithField("limit", authTotalMax.String()).Warn("the I/O queue did not authenticate in time; disconnecting it")
			q.tr.Disconnect()
		}
	})
}

// pendingAuth counts hostNQN's controllers waiting for their admin queue
// to authenticate.
func (s *Subsystem) pendingAuth(hostNQN string) int {
	n := 0
	for _, c := range s.Controllers() {
		if c.HostNQN == hostNQN && !c.authenticated.Load() && !c.isDead() {
			c.mu.Lock()
			keyed := c.auth.keys.Host != nil
			c.mu.Unlock()
			if keyed {
				n++
			}
		}
	}
	return n
}

// refreshAuth takes the subsystem's current secrets and policy, for a
// transaction on the admin queue: a key changed by reload or the admin
// socket applies from the host's next authentication on.
func (c *Controller) refreshAuth() {
	cfg := c.Subsystem.authConfigFor(c.HostNQN)
	c.mu.Lock()
	old := c.auth
	c.auth = cfg
	c.mu.Unlock()
	old.keys.clear()
}

func (c *Controller) authPolicy() AuthPolicy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.auth.policy
}

// countAuthFailure counts a failed authentication of the controller's
// host, under "unlisted" for a host the subsystem does not name.
func (c *Controller) countAuthFailure(reason string) {
	host := c.HostNQN
	if !c.authListed() {
		host = "unlisted"
	}
	c.Subsystem.Stats.AuthFailures.add(AuthFailureKey{Host: host, Reason: reason})
}

func (c *Controller) authListed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.auth.listed
}

// transformedKey returns the transformed host key (with the host NQN),
// or with ctrl the transformed controller key (with the subsystem NQN);
// nil when none is configured. The caller clears it.
func (c *Controller) transformedKey(ctrl bool) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, nqn := c.auth.keys.Host, c.HostNQN
	if ctrl {
		k, nqn = c.auth.keys.Ctrl, c.Subsystem.NQN
	}
	if k == nil {
		return nil
	}
	return dhchap.TransformKey(k, nqn)
}

func (c *Controller) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// armAuthDeadline bounds how long the admin queue may take to
// authenticate. As on the Linux target and SPDK, there is a limit per
// step: each authentication message on the admin queue gives the host
// another authStep, so a host slow at its DH arithmetic still gets in. A
// step that outlasts it makes the host's next message fail with
// AUTH_Failure1, so its connect ends at once (the Linux host, still
// connecting, would otherwise retry its command on each timeout for
// minutes); a host that sends nothing for another step goes. Unlike
// theirs, the step does not grow with the host's KATO, and the whole
// authentication is bounded too (authTotalMax), so that a host without
// the secret cannot hold the controller by asking for a long KATO or by
// sending messages in a loop. Keep alive starts once the admin queue has
// authenticated: until then the host cannot send one.
func (c *Controller) armAuthDeadline() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rearmAuthDeadline()
	c.authTotal = c.Subsystem.target.clock.AfterFunc(authTotalMax, c.authTotalExpired)
}

// authTotalExpired removes a controller whose host has not authenticated
// within authTotalMax of its Connect.
func (c *Controller) authTotalExpired() {
	if c.authenticated.Load() || c.isDead() {
		return
	}
	c.countAuthFailure("timeout")
	c.log.WithField("limit", authTotalMax.String()).Warn("the host did not authenticate in time; removing the controller")
	c.fatal("authentication timeout")
}

// authProgress restarts the admin queue's authentication deadline, unless
// a step already ran late.
func (c *Controller) authProgress() {
	if c.authenticated.Load() || c.authLate.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.authTimer != nil && !c.dead {
		c.rearmAuthDeadline()
	}
}

// rearmAuthDeadline starts a fresh timer; one already firing finds itself
// stale. Called with c.mu held.
func (c *Controller) rearmAuthDeadline() {
	if c.authTimer != nil {
		c.authTimer.Stop()
	}
	c.authGen++
	gen := c.authGen
	c.authTimer = c.Subsystem.target.clock.AfterFunc(authStep, func() { c.authExpired(gen) })
}

func (c *Controller) authExpired(gen uint64) {
	c.mu.Lock()
	stale := c.dead || c.authGen != gen || c.authenticated.Load()
	first := !stale && !c.authLate.Swap(true)
	if first {
		c.rearmAuthDeadline()
	}
	c.mu.Unlock()
	if stale {
		return
	}
	if first {
		c.log.WithField("step_limit", authStep.String()).Warn("the host is taking too long to authenticate; its next message fails")
		return
	}
	c.countAuthFailure("timeout")
	c.log.WithField("step_limit", authStep.String()).Warn("the host connected but stopped authenticating; removing the controller")
	c.fatal("authentication timeout")
}

// lateAuthStep takes an authentication message on the admin queue as
// progress, or, if a step already ran late, fails the transaction and
// reports so.
func (q *Queue) lateAuthStep() bool {
	c := q.ctrl
	if q.QID != 0 {
		return false
	}
	c.authProgress()
	if !c.authLate.Load() || c.authenticated.Load() || q.auth.step == nvme.AuthFailure1 {
		return false
	}
	q.authFail(nvme.AuthFailed, "timeout")
	return true
}

// HasHostKeys reports, in constant time for the secrets, whether the
// subsystem holds exactly k for hostNQN: for checking that a reload or an
// admin change took, without any way to read a secret back.
func (s *Subsystem) HasHostKeys(hostNQN string, k HostKeys) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	have := s.keys[hostNQN]
	return have.Host.Equal(k.Host) && have.Ctrl.Equal(k.Ctrl) &&
		slices.Equal(have.Policy.Hashes, k.Policy.Hashes) && slices.Equal(have.Policy.DHGroups, k.Policy.DHGroups)
}

func namesOf(ids []uint8, name func(uint8) string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = name(id)
	}
	return out
}
