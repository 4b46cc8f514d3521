package fabrics

import (
	"net/netip"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// Queue pair places. Every queue pair holds one of limits.max_queue_pairs
// from the moment its transport accepts it, because it costs a poller
// thread and transport memory from then on. Two caps keep one peer from
// taking them all:
//   - before Connect, the places one peer address holds
//     (limits.unconnected_per_address): the peer is not yet known, and a
//     Linux host opens all of a controller's I/O queues before it sends
//     their Connects, so this must stay above max_io_queues;
//   - from Connect on, the places one host NQN holds
//     (limits.queue_pairs_per_host), on every subsystem and port.
//
// A refused place is counted by reason in Target.Refused and logged at
// most once per LogEvery per reason, with the number left unlogged.

// Place is one queue pair's hold on a place: the transport gets it from
// ReserveQueue, the queue's Connect moves it to the host NQN, and the
// transport's teardown gives it back with Release.
type Place struct {
	t    *Target
	port uint16
	addr netip.Addr // the peer's, unmapped
	host string     // the host NQN once a Connect succeeded, "" before
	gone bool
}

// places counts the held places by peer address and by host NQN.
type places struct {
	mu          sync.Mutex
	unconnected map[netip.Addr]int
	byHost      map[string]int
	perAddr     int // 0: no cap
	perHost     int // 0: no cap
	logs        map[string]*LogLimit
}

// SetQueuePairCaps sets limits.unconnected_per_address and
// limits.queue_pairs_per_host (0: none). Places already held stay.
func (t *Target) SetQueuePairCaps(perAddress, perHost int) {
	t.places.mu.Lock()
	defer t.places.mu.Unlock()
	t.places.perAddr, t.places.perHost = perAddress, perHost
}

// ReserveQueue takes a place for a queue pair from peer, or returns nil
// (counted and logged) when the daemon-wide limit or the peer address's
// cap is reached. The caller refuses the connection then.
func (t *Target) ReserveQueue(port uint16, peer netip.Addr) *Place {
	peer = peer.Unmap()
	ps := &t.places
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if limit := t.maxQueuePairs.Load(); limit > 0 && t.queuePairs.Load() >= limit {
		t.refusePlace("queue_pair_limit", port, logrus.Fields{"max_queue_pairs": limit},
			"connection refused: the daemon has as many queue pairs as limits.max_queue_pairs allows")
		return nil
	}
	if ps.perAddr > 0 && ps.unconnected[peer] >= ps.perAddr {
		t.refusePlace("address_limit", port, logrus.Fields{"peer_address": peer.String(), "unconnected_per_address": ps.perAddr},
			"connection refused: the peer address has as many queue pairs waiting for their Connect as limits.unconnected_per_address allows")
		return nil
	}
	t.queuePairs.Add(1)
	if ps.unconnected == nil {
		ps.unconnected = map[netip.Addr]int{}
	}
	ps.unconnected[peer]++
	return &Place{t: t, port: port, addr: peer}
}

// connect moves the place to host, as its queue's Connect is accepted. It
// reports false, counted and logged, when host already holds
// limits.queue_pairs_per_host places; the place stays where it was.
func (p *Place) connect(host string) bool {
	if p == nil {
		return true // a transport of tests that holds no place
	}
	ps := &p.t.places
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.gone || p.host == host {
		return true
	}
	if ps.perHost > 0 && ps.byHost[host] >= ps.perHost {
		p.t.refusePlace("host_limit", p.port, logrus.Fields{"host": host, "queue_pairs_per_host": ps.perHost},
			"connect refused: the host has as many queue pairs as limits.queue_pairs_per_host allows")
		return false
	}
	ps.drop(p)
	if ps.byHost == nil {
		ps.byHost = map[string]int{}
	}
	ps.byHost[host]++
	p.host = host
	return true
}

// SetPlace gives the queue the place its transport reserved, so that its
// Connect can move it to the host. Call it before the queue takes commands.
func (q *Queue) SetPlace(p *Place) { q.place = p }

// Release gives the place back. Only the first call counts.
func (p *Place) Release() {
	if p == nil {
		return
	}
	ps := &p.t.places
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.gone {
		return
	}
	p.gone = true
	ps.drop(p)
	p.t.queuePairs.Add(-1)
}

// drop uncounts p where it is counted now. Called with ps.mu held.
func (ps *places) drop(p *Place) {
	if p.host != "" {
		if ps.byHost[p.host]--; ps.byHost[p.host] <= 0 {
			delete(ps.byHost, p.host)
		}
		return
	}
	if ps.unconnected[p.addr]--; ps.unconnected[p.addr] <= 0 {
		delete(ps.unconnected, p.addr)
	}
}

// HeldPlaces reports the places held before Connect by peer address and
// after it by host NQN, for tests.
func (t *Target) HeldPlaces() (unconnected map[netip.Addr]int, byHost map[string]int) {
	ps := &t.places
	ps.mu.Lock()
	defer ps.mu.Unlock()
	unconnected, byHost = map[netip.Addr]int{}, map[string]int{}
	for a, n := range ps.unconnected {
		unconnected[a] = n
	}
	for h, n := range ps.byHost {
		byHost[h] = n
	}
	return unconnected, byHost
}

// refusePlace counts a refused place and logs it, rate-limited by reason.
// Called with t.places.mu held.
func (t *Target) refusePlace(reason string, port uint16, f logrus.Fields, msg string) {
	t.Refused.Refuse(reason, port)
	ps := &t.places
	if ps.logs == nil {
		ps.logs = map[string]*LogLimit{}
	}
	l := ps.logs[reason]
	if l == nil {
		l = new(LogLimit)
		ps.logs[reason] = l
	}
	f["port"] = port
	l.Warn(time.Now(), t.Log.WithFields(f), msg)
}
