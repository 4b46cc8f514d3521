package fabrics

import (
	"errors"
	"fmt"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tlspsk"
)

// NVMe/TCP's secure channel is the transport's to run; what it needs from
// the target is the key a host's PSK identity stands for, and, once the
// host sends Connect, that Connect names the host and subsystem of the
// identity the channel was made with.

// SecureChanneler is a queue's transport that made a secure channel:
// TLSIdentity gives the host and subsystem NQNs of its PSK identity.
type SecureChanneler interface {
	TLSIdentity() (hostNQN, subNQN string, ok bool)
}

// ErrNoTLSKey says that no configured PSK stands for an identity.
var ErrNoTLSKey = errors.New("no tls_key for this host and subsystem")

// TLSPSK is the TLS PSK for the identity a host offered in its
// ClientHello, derived from the key configured for that host in the
// identity's subsystem (tlspsk.ServerPSK), or an error that says why
// there is none. An identity for the discovery subsystem takes the host's
// key from the first subsystem, by NQN, that has one: a host that holds
// one key for every subsystem of the target discovers with it too.
func (t *Target) TLSPSK(offered string) ([]byte, error) {
	id, err := tlspsk.ParseIdentity(offered)
	if err != nil {
		return nil, err
	}
	var subs []*Subsystem
	if id.SubsysNQN == nvme.DiscoveryNQN {
		subs = t.Subsystems()
	} else if s := t.Subsystem(id.SubsysNQN); s != nil {
		subs = []*Subsystem{s}
	}
	for _, s := range subs {
		k := s.tlsKey(id.HostNQN)
		if k.TLS == nil {
			continue
		}
		defer k.clear()
		return tlspsk.ServerPSK(k.TLS, offered, id.HostNQN, id.SubsysNQN, k.TLSDerivation)
	}
	if len(subs) == 0 {
		return nil, fmt.Errorf("%w: there is no subsystem %q", ErrNoTLSKey, id.SubsysNQN)
	}
	return nil, fmt.Errorf("%w: host %q has none in subsystem %q", ErrNoTLSKey, id.HostNQN, id.SubsysNQN)
}

// tlsKey is a copy of hostNQN's keys, for their TLS key; the caller
// clears it.
func (s *Subsystem) tlsKey(hostNQN string) HostKeys {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[hostNQN]
	if !ok || k.TLS == nil {
		return HostKeys{}
	}
	return HostKeys{TLS: k.clone().TLS, TLSDerivation: k.TLSDerivation}
}

// tlsIdentityMismatch reports whether the queue's secure channel was
// made for another host or subsystem than its Connect names.
func tlsIdentityMismatch(tr QueueTransport, hostNQN, subNQN string) (bool, string) {
	sc, ok := tr.(SecureChanneler)
	if !ok {
		return false, ""
	}
	h, s, ok := sc.TLSIdentity()
	if !ok || h == hostNQN && s == subNQN {
		return false, ""
	}
	return true, fmt.Sprintf("host %q, subsystem %q", h, s)
}
