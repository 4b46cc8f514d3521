package fabrics

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A host allowed by NQN alone (its NQN may have been spoofed) is given a
// secret: the controllers it already has never proved they hold it, so
// they end, through SetAccess (reload, admin socket) as through
// SetHostKeys.
func TestAuthKeyAddedEndsUnauthenticatedControllers(t *testing.T) {
	key := newTestSecret(t, 1, 32)
	for name, apply := range map[string]func(s *Subsystem, k HostKeys){
		"SetAccess": func(s *Subsystem, k HostKeys) {
			s.SetAccess(Access{Hosts: []string{testHost}, Keys: map[string]HostKeys{testHost: k}})
		},
		"SetHostKeys": func(s *Subsystem, k HostKeys) { s.SetHostKeys(map[string]HostKeys{testHost: k}) },
	} {
		t.Run(name, func(t *testing.T) {
			at := newAuthTarget(t, key, nil, AuthPolicy{})
			at.s.SetHostKeys(nil)
			h := connect(t, at.tg, at.p, testNQN)
			h.checkIO()
			apply(at.s, HostKeys{Host: key.parsed(t)})
			if n := len(at.s.Controllers()); n != 0 {
				t.Fatalf("%d controllers that never authenticated kept after the host got a secret", n)
			}
			if !h.io.Disconnected() || !h.admin.Disconnected() {
				t.Fatal("the unauthenticated controller's queues are still connected")
			}
			// A controller that authenticates with the secret stays.
			h2 := at.connectAuth(t, 0)
			in := initiator{hostNQN: testHost, subNQN: testNQN, key: key, tid: 1}
			if err := h2.authenticate(h2.admin, in); err != nil {
				t.Fatal(err)
			}
			apply(at.s, HostKeys{Host: key.parsed(t)})
			if n := len(at.s.Controllers()); n != 1 {
				t.Fatalf("%d controllers: an authenticated controller went when the same secret was applied again", n)
			}
		})
	}
}

// A host refused because its secret cannot be read stays out even with
// allow_any_host, and its attempts are counted.
func TestAuthRefusedHostWithAllowAnyHost(t *testing.T) {
	at := newAuthTarget(t, newTestSecret(t, 1, 32), nil, AuthPolicy{})
	at.s.SetAccess(Access{AllowAnyHost: true, Refused: []string{testHost}})
	h := &host{t: t, admin: NewLoopQueue(at.tg, at.p, 0, 32)}
	defer h.admin.Close()
	rsp := h.submit(h.admin, connectCmd(0, 31, 0, false), connectData(testNQN, testHost, 0xffff))
	if rsp.Status() != nvme.StatusConnectInvalidHost|nvme.DNR {
		t.Fatalf("connect of a refused host under allow_any_host: %v", rsp.Status())
	}
	if n := at.s.Stats.Refused.Counts()[RefusedKey{"host_key_unreadable", at.p.ID}]; n != 1 {
		t.Fatalf("refusals %v", at.s.Stats.Refused.Counts())
	}
}

// A host NQN with terminal escape sequences, from a host let in by
// allow_any_host, is refused at Connect, pointing at the field.
func TestConnectRefusesUnprintableNQN(t *testing.T) {
	tg, p, _ := testTarget(t)
	for _, c := range []struct {
		sub, host string
		off       uint16
	}{
		{testNQN, "nqn.2014-08.org.nvmexpress:\x1b]0;owned\x07", nvme.ConnectDataHostNQN},
		{testNQN, "nqn.2014-08.org.nvmexpress:\xc2\x9b2J", nvme.ConnectDataHostNQN},
		{testNQN + "\x1b[2J", testHost, nvme.ConnectDataSubNQN},
	} {
		h := &host{t: t, admin: NewLoopQueue(tg, p, 0, 32)}
		rsp := h.submit(h.admin, connectCmd(0, 31, 0, false), connectData(c.sub, c.host, 0xffff))
		h.admin.Close()
		if rsp.Status() != nvme.StatusConnectInvalidParam|nvme.DNR || rsp.Result() != uint64(nvme.ConnectInvalidParam(c.off, true)) {
			t.Fatalf("connect as %q to %q: %v, result %#x", c.host, c.sub, rsp.Status(), rsp.Result())
		}
	}
	if n := tg.Refused.Counts()[RefusedKey{"invalid_nqn", p.ID}]; n != 3 {
		t.Fatalf("refusals %v", tg.Refused.Counts())
	}
}
