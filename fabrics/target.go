package fabrics

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// Target is the set of subsystems and ports one daemon serves, plus the
// discovery subsystem. Its methods are safe for concurrent use: queues read
// it while the operator changes it.
type Target struct {
	Log *logrus.Entry

	mu         sync.Mutex
	ports      map[uint16]*Port
	subsystems map[string]*Subsystem
	discovery  *Subsystem
	referrals  map[uint16][]Referral    // by port ID (discovery.go)
	genctr     atomic.Uint64            // discovery log generation counter
	anaPinned  map[uint32]nvme.ANAState // groups whose state is the same on every port (ana_pin.go)
	// Read by the I/O path without t.mu (ana_pin.go):
	pinnedSet atomic.Pointer[[nvme.MaxANAGroups + 1]bool] // the groups in anaPinned
	onFenced  atomic.Pointer[func(group uint32)]          // SetFencedHook's

	// Refused counts connects to subsystems that do not exist (or not on
	// the port used), and queue pairs refused for the daemon-wide limit:
	// they belong to no subsystem.
	Refused Refusals
	// connectTimeouts counts queue pairs closed for want of a Connect
	// (connectdeadline.go), by port.
	connectTimeouts portCounts

	lifetime atomic.Pointer[Lifetime] // earlier runs, from the state file

	// Queue pairs reserved by transports (ReserveQueue), and the most
	// allowed at once; 0 is no limit.
	queuePairs    atomic.Int64
	maxQueuePairs atomic.Int64
	places        places // who holds them (places.go)

	// clock starts the keep alive timers (clock.go).
	clock Clock
	// background runs work that must not hold up a poller (a shutdown's
	// flush, a write cache disable's flush) on a goroutine of its own;
	// tests replace it to wait for that work rather than poll its effect.
	background func(func())

	ioEngine atomic.Int32 // an IOEngine (engine.go)
}

// Lifetime is the daemon's life as the SMART log reports it: like a
// drive's, it spans restarts.
type Lifetime struct {
	PowerCycles     uint64        // starts, this one included
	UnsafeShutdowns uint64        // runs that ended without a clean shutdown
	PowerOn         time.Duration // earlier runs; Lifetime() adds this run
}

// SetLifetime records what earlier runs left in the state file.
func (t *Target) SetLifetime(l Lifetime) { t.lifetime.Store(&l) }

// Lifetime is the daemon's lifetime up to now.
func (t *Target) Lifetime() Lifetime {
	l := Lifetime{PowerCycles: 1}
	if p := t.lifetime.Load(); p != nil {
		l = *p
	}
	l.PowerOn += time.Since(start)
	return l
}

// NewTarget returns an empty target.
func NewTarget(log *logrus.Entry) *Target {
	if log == nil {
		log = logrus.NewEntry(logrus.StandardLogger())
	}
	t := &Target{
		Log:        log,
		ports:      map[uint16]*Port{},
		referrals:  map[uint16][]Referral{},
		subsystems: map[string]*Subsystem{},
		clock:      wallClock{},
		background: func(f func()) { go f() },
	}
	t.discovery = newSubsystem(t, nvme.DiscoveryNQN, "", "", true)
	t.discovery.isDiscovery = true
	t.discovery.maxIOQueues = 0 // admin queue only
	return t
}

// SetMaxQueuePairs sets the daemon-wide queue pair limit (0: none). Queue
// pairs already connected beyond a lower limit stay.
func (t *Target) SetMaxQueuePairs(n int) { t.maxQueuePairs.Store(int64(n)) }

// QueuePairs reports the reserved queue pairs and the limit (0: none).
func (t *Target) QueuePairs() (reserved, limit int) {
	return int(t.queuePairs.Load()), int(t.maxQueuePairs.Load())
}

// freeQueuePairs is how many more queue pairs the limit allows, or -1
// when there is no limit.
func (t *Target) freeQueuePairs() int {
	limit := t.maxQueuePairs.Load()
	if limit == 0 {
		return -1
	}
	return int(max(0, limit-t.queuePairs.Load()))
}

// Port is a transport address hosts connect through.
type Port struct {
	ID             uint16
	Transport      uint8 // TRTYPE of the discovery log (nvme.TransportRDMA when 0)
	Address        netip.Addr
	ServiceID      uint16 // trsvcid
	InlineDataSize uint32
	MaxQueueSize   uint16
	TLS            SecureChannel // TCP only

	ana atomic.Pointer[anaTable] // nil: every group optimized (ana.go)
}

// SecureChannel is what a TCP port asks of TLS.
type SecureChannel uint8

const (
	TLSNone     SecureChannel = iota // plaintext only
	TLSAllowed                       // TLS 1.3 for hosts that start it, plaintext for the others
	TLSRequired                      // TLS 1.3 only
)

// AddPort registers a port.
func (t *Target) AddPort(p *Port) error {
	t.mu.Lock()
	if _, ok := t.ports[p.ID]; ok {
		t.mu.Unlock()
		return fmt.Errorf("port %d already exists", p.ID)
	}
	t.pinPortLocked(p)
	t.ports[p.ID] = p
	t.mu.Unlock()
	t.discoveryChanged()
	return nil
}

// Port returns the port with id, or nil.
func (t *Target) Port(id uint16) *Port {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ports[id]
}

// PortIDs returns the IDs of the registered ports, in ascending order.
func (t *Target) PortIDs() []uint16 {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]uint16, 0, len(t.ports))
	for id := range t.ports {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// AddSubsystem registers a subsystem.
func (t *Target) AddSubsystem(s *Subsystem) error {
	t.mu.Lock()
	if _, ok := t.subsystems[s.NQN]; ok || s.NQN == nvme.DiscoveryNQN {
		t.mu.Unlock()
		return fmt.Errorf("subsystem %s already exists", s.NQN)
	}
	s.target = t
	t.subsystems[s.NQN] = s
	t.mu.Unlock()
	t.discoveryChanged()
	return nil
}

// Subsystem returns the subsystem with nqn, or nil.
func (t *Target) Subsystem(nqn string) *Subsystem {
	t.mu.Lock()
	defer t.mu.Unlock()
	if nqn == nvme.DiscoveryNQN {
		return t.discovery
	}
	return t.subsystems[nqn]
}

// Subsystems lists the subsystems sorted by NQN.
func (t *Target) Subsystems() []*Subsystem {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Subsystem, 0, len(t.subsystems))
	for _, s := range t.subsystems {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NQN < out[j].NQN })
	return out
}

// discoveryChanged bumps the discovery log generation and tells connected
// discovery controllers, after the change is made and without t.mu held:
// by the time a change returns, the event is raised. A host reading the
// log meanwhile sees the new generation on its next read and reads again.
func (t *Target) discoveryChanged() {
	t.genctr.Add(1)
	t.discovery.raiseEvent(nvme.AsyncTypeNotice, nvme.AsyncNoticeDiscoveryLog, nvme.LogDiscovery)
}

// Close disconnects every controller and closes every namespace backend.
func (t *Target) Close() {
	for _, s := range append(t.Subsystems(), t.discovery) {
		s.disconnectAll()
		s.closeNamespaces()
	}
}

// Subsystem is an NVM subsystem: namespaces, the hosts allowed in, the
// ports it is reachable through, and its live controllers.
type Subsystem struct {
	NQN          string
	Serial       string
	Model        string
	AllowAnyHost bool

	target      *Target
	isDiscovery bool

	mu          sync.Mutex
	hosts       map[string]bool
	ports       map[uint16]bool // nil: every port
	controllers map[uint16]*Controller
	// Controller IDs come from cntlidMin..cntlidMax (SetControllerIDs);
	// nextCNTLID is where allocController's next search starts.
	cntlidMin, cntlidMax uint16
	nextCNTLID           uint16
	keys                 map[string]HostKeys // DH-HMAC-CHAP secrets by host NQN (auth.go)
	refused              map[string]bool     // hosts whose secret could not be read (SetAccess)
	policy               AuthPolicy

	// Limits for new controllers (SetLimits).
	maxControllers int
	maxIOQueues    uint16

	namespaces atomic.Pointer[namespaceSet]
	// visibility limits namespaces to some hosts (visibility.go).
	visibility map[uint32]map[string]bool

	Stats SubsystemStats
}

// namespaceSet is an immutable snapshot of a subsystem's namespaces, read
// by queues without a lock and replaced whole on change.
type namespaceSet struct {
	byID map[uint32]*Namespace
	ids  []uint32 // sorted
}

// NewSubsystem returns a subsystem with no namespaces. An empty serial is
// derived from the NQN so it is stable across restarts.
func NewSubsystem(nqn, serial, model string, allowAnyHost bool) *Subsystem {
	return newSubsystem(nil, nqn, serial, model, allowAnyHost)
}

func newSubsystem(t *Target, nqn, serial, model string, allowAnyHost bool) *Subsystem {
	if serial == "" {
		sum := sha256.Sum256([]byte(nqn))
		serial = hex.EncodeToString(sum[:10])
	}
	if model == "" {
		model = "nvmeof-tgt"
	}
	s := &Subsystem{
		NQN: nqn, Serial: serial, Model: model, AllowAnyHost: allowAnyHost,
		target:      t,
		hosts:       map[string]bool{},
		controllers: map[uint16]*Controller{},
		cntlidMin:   nvme.MinControllerID,
		cntlidMax:   nvme.MaxControllerID,
		nextCNTLID:  nvme.MinControllerID,

		maxControllers: nvme.MaxControllerID,
		maxIOQueues:    nvme.MaxIOQueues,
	}
	s.namespaces.Store(&namespaceSet{byID: map[uint32]*Namespace{}})
	return s
}

// AllowHost adds a host NQN to the allow-list.
func (s *Subsystem) AllowHost(hostNQN string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts[hostNQN] = true
}

// SetPorts limits the subsystem to the given port IDs; none means every port.
func (s *Subsystem) SetPorts(ids []uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ids) == 0 {
		s.ports = nil
		return
	}
	s.ports = map[uint16]bool{}
	for _, id := range ids {
		s.ports[id] = true
	}
}

// HostAllowed reports whether hostNQN may connect.
func (s *Subsystem) HostAllowed(hostNQN string) bool {
	if s.isDiscovery {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.refused[hostNQN] && (s.AllowAnyHost || s.hosts[hostNQN])
}

// OnPort reports whether the subsystem is reachable through port id.
func (s *Subsystem) OnPort(id uint16) bool {
	if s.isDiscovery {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ports == nil || s.ports[id]
}

// Namespace is one namespace: a backend and its identity.
type Namespace struct {
	ID         uint32
	Backend    backend.Backend
	ReadOnly   bool
	UUID       [16]byte
	BlockShift uint8
	blocks     atomic.Uint64 // capacity; changes only with ResizeNamespace

	traits   backend.Traits
	blocking bool               // backend calls may sleep: they run on the queue's workers
	file     backend.FileBacked // non-nil: reads, writes and flushes may go through a ring
	async    backend.AsyncIO    // non-nil: reads, writes and flushes may start without a worker
	gate     writeGate          // fused Compare and Write against every other write
	removed  atomic.Bool        // set once RemoveNamespace unpublished it
	anaGroup atomic.Uint32      // ANA group (ana.go)
	holds    atomic.Int64       // holders outside any queue (hold), counted by drain
	// unsettled counts the writes of a gateway group that timed out in
	// the cluster (backendStatus): they may still land, so they stay in
	// flight until this client is fenced (QuiesceANAGroup).
	unsettled atomic.Int64
	// subsystem is the one AddNamespace put it in: its controllers hear
	// of ANA changes the namespace makes (SetReservationUnavailable).
	subsystem atomic.Pointer[Subsystem]
	resv      reservations // reservation.go
	qos       namespaceQoS // rate limits (qos.go)

	statsMu sync.Mutex
	retired IOSnapshot // counters of queues that closed
	live    []*IOStats // every queue's counters for it, until the queue is gone
}

// NewNamespace wraps an opened backend.
func NewNamespace(nsid uint32, b backend.Backend, readOnly bool, uuid [16]byte) (*Namespace, error) {
	bs := b.BlockSize()
	if bs < 512 || bs&(bs-1) != 0 {
		return nil, fmt.Errorf("namespace %d: block size %d is not a power of two ≥ 512", nsid, bs)
	}
	if nsid == 0 || nsid > nvme.MaxNamespaces {
		return nil, fmt.Errorf("namespace id %d out of range 1..%d", nsid, nvme.MaxNamespaces)
	}
	shift := uint8(0)
	for 1<<shift != bs {
		shift++
	}
	blocks := uint64(b.Size()) >> shift
	if blocks == 0 {
		return nil, fmt.Errorf("namespace %d: backend is smaller than one block", nsid)
	}
	ns := &Namespace{ID: nsid, Backend: b, ReadOnly: readOnly, UUID: uuid, BlockShift: shift,
		traits: backend.TraitsOf(b)}
	nb, ok := b.(backend.NonBlocking)
	ns.blocking = !ok || !nb.NonBlocking()
	ns.file, _ = b.(backend.FileBacked)
	ns.async, _ = b.(backend.AsyncIO)
	ns.gate.init()
	ns.blocks.Store(blocks)
	ns.anaGroup.Store(DefaultANAGroup)
	return ns, nil
}

// Blocks is the capacity in logical blocks.
func (ns *Namespace) Blocks() uint64 { return ns.blocks.Load() }

// EUI64 is the namespace's IEEE extended unique identifier, derived from
// its UUID so that it is as stable: an OUI-less, locally administered value.
func (ns *Namespace) EUI64() [8]byte {
	var e [8]byte
	for i := range 8 {
		e[i] = ns.UUID[i] ^ ns.UUID[i+8]
	}
	e[0] = e[0]&^0x01 | 0x02
	return e
}

// ErrNamespaceExists is returned when adding a namespace ID twice.
var ErrNamespaceExists = errors.New("namespace already exists")

// AddNamespace publishes ns to connected hosts.
func (s *Subsystem) AddNamespace(ns *Namespace) error {
	s.mu.Lock()
	old := s.namespaces.Load()
	if old.byID[ns.ID] != nil {
		s.mu.Unlock()
		return fmt.Errorf("nsid %d: %w", ns.ID, ErrNamespaceExists)
	}
	next := &namespaceSet{byID: make(map[uint32]*Namespace, len(old.byID)+1)}
	for id, n := range old.byID {
		next.byID[id] = n
	}
	next.byID[ns.ID] = ns
	ns.subsystem.Store(s)
	next.ids = append(append([]uint32(nil), old.ids...), ns.ID)
	sort.Slice(next.ids, func(i, j int) bool { return next.ids[i] < next.ids[j] })
	s.namespaces.Store(next)
	s.mu.Unlock()
	s.namespacesChanged(ns.ID)
	return nil
}

// Namespace returns the namespace nsid, or nil. Lock-free.
func (s *Subsystem) Namespace(nsid uint32) *Namespace {
	return s.namespaces.Load().byID[nsid]
}

// NamespaceIDs lists the active namespace IDs in ascending order.
func (s *Subsystem) NamespaceIDs() []uint32 { return s.namespaces.Load().ids }

func (s *Subsystem) namespacesChanged(nsid uint32) {
	s.mu.Lock()
	ctrls := make([]*Controller, 0, len(s.controllers))
	for _, c := range s.controllers {
		ctrls = append(ctrls, c)
	}
	s.mu.Unlock()
	for _, c := range ctrls {
		if c.sees(nsid) {
			c.namespaceChanged(nsid)
		}
	}
}

// closeNamespaces flushes and closes every backend once nothing uses it
// (a flush a host's shutdown notification started, or a command still on
// a worker): what a host wrote must be on media before the daemon exits,
// even if the host never flushed (it may be gone).
func (s *Subsystem) closeNamespaces() {
	for _, ns := range s.namespaces.Load().byID {
		log := s.log().WithFields(logrus.Fields{"subsystem": s.NQN, "nsid": ns.ID})
		ns.removed.Store(true) // new holds and commands back off
		ns.openQoS()
		if !ns.drain(drainTimeout) {
			log.Warn("a backend call has not returned after 10 s; closing its backend anyway")
		}
		ns.flushAndClose(log)
	}
}

// flushAndClose makes ns's completed writes durable and closes its backend.
func (ns *Namespace) flushAndClose(log *logrus.Entry) {
	ns.CloseReservationStore(log)
	if !ns.ReadOnly {
		if err := ns.Backend.Flush(); err != nil {
			log.WithError(err).Error("flushing namespace before closing it failed: writes acknowledged to hosts may not be on stable media")
		}
	}
	if err := ns.Backend.Close(); err != nil {
		log.WithError(err).Warn("closing namespace backend")
	}
}

// Controllers returns the live controllers.
func (s *Subsystem) Controllers() []*Controller {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Controller, 0, len(s.controllers))
	for _, c := range s.controllers {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SetLimits bounds the controllers the subsystem has at once and the I/O
// queues each may have (Set Features Number of Queues is answered with at
// most that many). They apply to controllers created from then on; the
// connected ones keep what they have.
func (s *Subsystem) SetLimits(maxControllers, maxIOQueues int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxControllers = min(max(maxControllers, 1), nvme.MaxControllerID)
	s.maxIOQueues = uint16(min(max(maxIOQueues, 1), nvme.MaxIOQueues))
}

// Limits reports what SetLimits set.
func (s *Subsystem) Limits() (maxControllers, maxIOQueues int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxControllers, int(s.maxIOQueues)
}

// SetControllerIDs bounds the IDs of controllers created from then on to
// lo..hi, within 1..FFEFh. Daemons that serve one subsystem use disjoint
// ranges: a host refuses a second controller with an ID it already has in
// the subsystem. Connected controllers keep their IDs, in the range or not.
func (s *Subsystem) SetControllerIDs(lo, hi uint16) error {
	if lo < nvme.MinControllerID || hi > nvme.MaxControllerID || lo > hi {
		return fmt.Errorf("controller ID range %d..%d is not within %d..%d", lo, hi, nvme.MinControllerID, nvme.MaxControllerID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cntlidMin, s.cntlidMax = lo, hi
	return nil
}

// ControllerIDs reports the range SetControllerIDs set.
func (s *Subsystem) ControllerIDs() (lo, hi uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cntlidMin, s.cntlidMax
}

// Why allocController refuses a controller.
var (
	errControllerLimit = errors.New("controller limit reached")
	errNoControllerID  = errors.New("every controller ID of the range is in use")
)

// allocController gives c a free controller ID, unless the subsystem is at
// its controller limit. IDs are handed out next-fit: the search starts
// after the last ID given, wraps within the range and skips IDs in use, so
// an ID just freed is not reused at once (a host may still be tearing down
// the controller that had it). The Linux target takes the lowest free ID.
func (s *Subsystem) allocController(c *Controller) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isDiscovery && len(s.controllers) >= s.maxControllers {
		return errControllerLimit
	}
	lo, hi := s.cntlidMin, s.cntlidMax
	id := s.nextCNTLID
	for range int(hi-lo) + 1 {
		if id < lo || id > hi {
			id = lo
		}
		if s.controllers[id] == nil {
			c.ID = id
			c.hidden.Store(s.hiddenFromLocked(c.HostNQN))
			s.controllers[id] = c
			s.nextCNTLID = id + 1 // hi+1 at most: FFF0h, no overflow
			return nil
		}
		id++
	}
	return errNoControllerID
}

func (s *Subsystem) controller(id uint16) *Controller {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.controllers[id]
}

func (s *Subsystem) removeController(c *Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.controllers[c.ID] == c {
		delete(s.controllers, c.ID)
	}
}

func (s *Subsystem) disconnectAll() {
	for _, c := range s.Controllers() {
		c.fatal("target shutting down")
	}
}

func (s *Subsystem) raiseEvent(typ, info, logPage uint8) {
	for _, c := range s.Controllers() {
		c.raiseEvent(typ, info, logPage)
	}
}

func portString(p *Port) string {
	if p == nil {
		return ""
	}
	return netip.AddrPortFrom(p.Address, p.ServiceID).String()
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
