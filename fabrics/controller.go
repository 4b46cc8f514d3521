package fabrics

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// Limits advertised to hosts.
const (
	maxOutstandAER = 4 // AERL+1
	errorLogLen    = 64
	// controllerTimeout is CAP.TO in 500 ms units: how long the host waits
	// for CSTS.RDY to follow CC.EN.
	controllerTimeout = 15 * 2
	// discoveryKATO is the keep alive timeout a discovery controller gets
	// when the host asks for none, as the Linux target's: a host that
	// connected persistently and went away does not hold it for ever.
	discoveryKATO = 120_000 // milliseconds
	// keepAliveSlack is added to KATO: the host's transport gets some
	// slack, as the Linux target allows.
	keepAliveSlack = time.Second
)

// Controller is the state one host's Connect on an admin queue creates:
// the registers the host drives (CC, CSTS), keep alive, asynchronous
// events, features and the queues bound to it.
type Controller struct {
	ID        uint16
	Subsystem *Subsystem
	HostNQN   string
	HostID    [nvme.HostIDSize]byte
	Port      *Port
	Created   time.Time
	log       *logrus.Entry

	// vwc: the controller reported a volatile write cache (Identify VWC),
	// fixed at creation. writeThrough: every write must be durable before
	// it completes, because no cache was reported or the host disabled it
	// (Set Features Volatile Write Cache), so the host will not flush.
	vwc          bool
	writeThrough atomic.Bool
	// hidden is the namespaces the host may not see (visibility.go).
	hidden atomic.Pointer[hiddenSet]
	// anaChanges is the ANA log's change count: the changes of what this
	// controller's ANA log reports (ana.go), not of others' namespaces.
	anaChanges atomic.Uint64

	// cc and csts change only under mu, so that a register write, the
	// keep alive timer and a shutdown finishing never undo each other;
	// they are atomics so that Ready and Property Get read them without it.
	cc   atomic.Uint32
	csts atomic.Uint32
	kato atomic.Uint32 // milliseconds; 0 disables keep alive
	// traffic is set by any command since the keep alive timer was armed:
	// proof of life as good as Keep Alive, as the Linux target counts it.
	traffic atomic.Bool

	mu          sync.Mutex
	queues      []*Queue // by queue ID; [0] is the admin queue
	maxIOQueues uint16   // the subsystem's limit when the controller was created
	ioQueues    uint16   // I/O queues granted by Set Features
	aers        []*Request
	events      []uint32 // raised while no AER was outstanding
	aenConfig   uint32
	aenMasked   uint32 // OAES bits of events reported whose log page was not read yet
	changedNS   []uint32
	nsOverflow  bool    // more changes than the Changed Namespace List holds
	resv        resvLog // reservation notifications (reservation.go)
	errLog      [errorLogLen]nvme.ErrorLogEntry
	errCount    uint64
	kaTimer     Timer
	kaGen       uint64 // which arming of the timer is current
	// At most one shutdown flush runs per controller: a shutdown
	// notification while one runs asks it to flush once more.
	flushing   bool
	flushAgain bool
	dead       bool

	// In-band authentication (auth.go): the secrets and policy in use,
	// whether the admin queue authenticated, and the deadline for it.
	auth          authConfig
	authenticated atomic.Bool
	authLate      atomic.Bool // a step outlasted its limit: the host's next message fails
	authRevoked   atomic.Bool // a queue failed authentication: no queue runs commands
	authTimer     Timer
	authTotal     Timer  // bounds the whole authentication
	authGen       uint64 // which authTimer is current
}

func newController(s *Subsystem, q *Queue, d nvme.ConnectData, kato uint32) *Controller {
	_, limit := s.Limits()
	maxIO := uint16(limit)
	c := &Controller{
		Subsystem:   s,
		HostNQN:     d.HostNQN,
		HostID:      d.HostID,
		Port:        q.port,
		Created:     time.Now(),
		queues:      make([]*Queue, int(maxIO)+1),
		maxIOQueues: maxIO,
		ioQueues:    maxIO,
	}
	c.kato.Store(kato)
	c.vwc = s.volatileCacheFor(d.HostNQN)
	c.writeThrough.Store(!c.vwc)
	return c
}

// Ready reports CSTS.RDY.
func (c *Controller) Ready() bool { return c.csts.Load()&nvme.CSTSReady != 0 }

// enabled reports whether the controller processes commands: CC.EN and
// CSTS.RDY both set. Before that, and after a reset, only Fabrics commands
// are accepted.
func (c *Controller) enabled() bool {
	return c.cc.Load()&nvme.CCEnable != 0 && c.csts.Load()&nvme.CSTSReady != 0
}

// Log returns the controller's log entry.
func (c *Controller) Log() *logrus.Entry { return c.log }

// Queues counts the queues bound to the controller (admin included).
func (c *Controller) Queues() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, q := range c.queues {
		if q != nil {
			n++
		}
	}
	return n
}

// propertyGet reads a register. CAP is 8 bytes; a 4-byte read at its
// offset or 4 bytes further returns the low or the high half. The others
// are 4 bytes and read only as such.
func (c *Controller) propertyGet(off uint32, size8 bool) (uint64, nvme.Status) {
	capReg := nvme.CAP(uint16(c.Port.MaxQueueSize-1), controllerTimeout)
	switch {
	case off == nvme.RegCAP && size8:
		return capReg, 0
	case off == nvme.RegCAP && !size8:
		return nvme.CAPLow(capReg), 0
	case off == nvme.RegCAPHigh && !size8:
		return nvme.CAPHigh(capReg), 0
	case off == nvme.RegVS && !size8:
		return uint64(nvme.Version(1, 3, 0)), 0
	case off == nvme.RegCC && !size8:
		return uint64(c.cc.Load()), 0
	case off == nvme.RegCSTS && !size8:
		return uint64(c.csts.Load()), 0
	}
	return 0, nvme.StatusInvalidField | nvme.DNR
}

func (c *Controller) propertySet(off uint32, val uint64, size8 bool) nvme.Status {
	if off != nvme.RegCC || size8 {
		return nvme.StatusInvalidField | nvme.DNR
	}
	c.setCC(uint32(val))
	return 0
}

// ccSupported checks the settings a host enables the controller with. A
// discovery controller has no I/O queues, so it ignores their entry sizes
// (hosts leave them 0 there), as the Linux target does.
func (c *Controller) ccSupported(v uint32) bool {
	iosqes := (v >> nvme.CCIOSQEShift) & nvme.CCQESMask
	iocqes := (v >> nvme.CCIOCQEShift) & nvme.CCQESMask
	mps := (v >> nvme.CCMPSShift) & nvme.CCMPSMask
	ams := (v >> nvme.CCAMSShift) & nvme.CCAMSMask
	css := (v >> nvme.CCCSSShift) & nvme.CCCSSMask
	if !c.Subsystem.isDiscovery && (iosqes != nvme.CCIOSQE || iocqes != nvme.CCIOCQE) {
		return false
	}
	return mps == 0 && ams == 0 && css == 0
}

// setCC runs the controller state machine for a CC write, under c.mu:
//   - enabling checks the settings and sets CSTS.RDY (or CSTS.CFS);
//   - disabling is a controller reset: the I/O queues go away, the
//     features return to their defaults and outstanding Asynchronous Event
//     Requests end (the admin queue and KATO, both from Connect, stay);
//   - a shutdown notification reports "processing" until every namespace
//     is flushed, off the poller, then "complete".
func (c *Controller) setCC(v uint32) {
	c.mu.Lock()
	if c.dead {
		// Torn down (keep alive expiry, fatal error): CSTS stays as the
		// host last saw it, CFS included, until its queues are gone.
		c.mu.Unlock()
		return
	}
	old := c.cc.Swap(v)
	csts := c.csts.Load()
	var ended []*Request
	reset, shutdown := false, false
	if v&nvme.CCEnable != 0 && old&nvme.CCEnable == 0 {
		if c.ccSupported(v) {
			csts = csts&^(nvme.CSTSShstMask|nvme.CSTSFatal) | nvme.CSTSReady
			c.armKeepAlive() // the host had no reason to send Keep Alive before
			c.log.Info("controller enabled")
		} else {
			c.log.WithField("cc", v).Warn("host enabled controller with unsupported CC settings; reporting controller fatal status")
			csts |= nvme.CSTSFatal
		}
	}
	if v&nvme.CCEnable == 0 && old&nvme.CCEnable != 0 {
		csts &^= nvme.CSTSReady
		ended = c.resetLocked()
		reset = true
		c.log.Info("controller disabled")
	}
	if v&nvme.CCShnMask != 0 && old&nvme.CCShnMask == 0 {
		csts = csts&^nvme.CSTSShstMask | nvme.CSTSShstProcessing
		if c.flushing {
			// Writes completed since that flush began need another.
			c.flushAgain = true
		} else {
			c.flushing, shutdown = true, true
		}
		c.log.Info("host shuts the controller down; flushing every namespace")
	}
	if v&nvme.CCShnMask == 0 && old&nvme.CCShnMask != 0 {
		csts &^= nvme.CSTSShstMask // a flush still running no longer reports
	}
	c.csts.Store(csts)
	c.mu.Unlock()
	for _, r := range ended {
		// As the Linux target fails them when it frees a controller.
		r.status = nvme.StatusInternal | nvme.DNR
		r.q.completeAsync(r)
	}
	if reset {
		c.dropIOQueues()
	}
	if shutdown {
		c.Subsystem.target.background(c.shutdown)
	}
}

// resetLocked returns features and event state to what a new controller
// has, and takes the outstanding AERs for the caller to complete.
func (c *Controller) resetLocked() []*Request {
	ended := c.aers
	c.aers = nil
	c.events = nil
	c.aenConfig = 0
	c.aenMasked = 0
	c.changedNS = c.changedNS[:0]
	c.nsOverflow = false
	c.resvResetLocked()
	c.ioQueues = c.maxIOQueues
	return ended
}

// shutdown flushes the subsystem's namespaces, again while shutdown
// notifications came during the flush, then reports the shutdown complete
// unless the host cleared CC.SHN meanwhile. A host toggling CC.SHN thus
// keeps one flush running, not one per toggle.
func (c *Controller) shutdown() {
	for {
		err := c.flushNamespaces()
		if err != nil {
			c.log.WithError(err).Error("flush at shutdown notification failed; completed writes may not be durable")
		}
		c.mu.Lock()
		if c.flushAgain && !c.dead {
			c.flushAgain = false
			c.mu.Unlock()
			continue
		}
		c.flushing, c.flushAgain = false, false
		if c.cc.Load()&nvme.CCShnMask != 0 && c.csts.Load()&nvme.CSTSShstMask == nvme.CSTSShstProcessing {
			c.csts.Store(c.csts.Load()&^nvme.CSTSShstMask | nvme.CSTSShstComplete)
			c.log.Info("controller shut down")
		}
		c.mu.Unlock()
		return
	}
}

// dropIOQueues disconnects every I/O queue, as a controller reset requires.
func (c *Controller) dropIOQueues() {
	c.mu.Lock()
	qs := make([]*Queue, 0, len(c.queues))
	for _, q := range c.queues[1:] {
		if q != nil {
			qs = append(qs, q)
		}
	}
	c.mu.Unlock()
	for _, q := range qs {
		q.tr.Disconnect()
	}
}

// attach binds q as queue qid. It fails if the ID is taken.
func (c *Controller) attach(q *Queue) nvme.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return nvme.StatusCommandSequence | nvme.DNR
	}
	if int(q.QID) >= len(c.queues) || c.queues[q.QID] != nil {
		return nvme.StatusCommandSequence | nvme.DNR
	}
	c.queues[q.QID] = q
	return 0
}

// detach unbinds q. Losing the admin queue ends the controller.
func (c *Controller) detach(q *Queue) {
	c.mu.Lock()
	if c.queues[q.QID] == q {
		c.queues[q.QID] = nil
	}
	// Outstanding AERs of this queue go back to the transport.
	kept := c.aers[:0]
	for _, r := range c.aers {
		if r.q == q {
			q.unhold()
			continue
		}
		kept = append(kept, r)
	}
	c.aers = kept
	admin := q.QID == 0
	c.mu.Unlock()
	if admin {
		c.destroy("admin queue disconnected")
	}
}

// destroy ends the controller: its I/O queues are disconnected and its ID
// is freed.
func (c *Controller) destroy(reason string) { c.end(reason, 0, 0) }

// end tears the controller down, first adding csts (CFS for a fatal end)
// under the same lock that marks it dead, so that a CC write racing the
// teardown can neither clear it nor revive the controller. The queues are
// disconnected after grace (at once when 0), so that a response just
// completed reaches the host first.
func (c *Controller) end(reason string, csts uint32, grace time.Duration) {
	c.mu.Lock()
	c.csts.Store(c.csts.Load() | csts)
	if c.dead {
		c.mu.Unlock()
		return
	}
	c.dead = true
	c.stopKeepAlive()
	if c.authTimer != nil {
		c.authTimer.Stop()
	}
	if c.authTotal != nil {
		c.authTotal.Stop()
	}
	c.auth.keys.clear()
	var qs []*Queue
	for _, q := range c.queues {
		if q != nil {
			qs = append(qs, q)
		}
	}
	c.mu.Unlock()
	c.Subsystem.removeController(c)
	disconnect := func() {
		for _, q := range qs {
			q.tr.Disconnect()
		}
	}
	if grace == 0 {
		disconnect()
	} else {
		c.Subsystem.target.clock.AfterFunc(grace, disconnect)
	}
	c.log.WithField("reason", reason).Info("controller removed")
}

// fatal reports a controller fatal status and disconnects every queue; the
// host recovers by reconnecting.
func (c *Controller) fatal(reason string) { c.end(reason, nvme.CSTSFatal, 0) }

// endAfter removes the controller now and disconnects its queues after grace.
func (c *Controller) endAfter(reason string, grace time.Duration) { c.end(reason, 0, grace) }

// armKeepAlive (re)starts the keep alive timer with a fresh timer, so that
// one already firing finds itself stale and does nothing. Called with
// c.mu held; never re-arms once the controller is torn down.
func (c *Controller) armKeepAlive() {
	c.stopKeepAlive()
	kato := c.kato.Load()
	if c.dead || kato == 0 {
		return
	}
	d := time.Duration(kato)*time.Millisecond + keepAliveSlack
	c.kaGen++
	gen := c.kaGen
	c.kaTimer = c.Subsystem.target.clock.AfterFunc(d, func() { c.keepAliveExpired(gen, kato) })
}

func (c *Controller) stopKeepAlive() {
	if c.kaTimer != nil {
		c.kaTimer.Stop()
		c.kaTimer = nil
	}
}

func (c *Controller) keepAliveExpired(gen uint64, kato uint32) {
	c.mu.Lock()
	stale := c.dead || c.kaTimer == nil || c.kaGen != gen
	if !stale && c.traffic.Swap(false) {
		// Commands came in, just no Keep Alive yet (a slow host is still
		// connecting its I/O queues): wait another period.
		c.armKeepAlive()
		stale = true
	}
	c.mu.Unlock()
	if stale {
		return
	}
	c.Subsystem.Stats.KeepAliveExpired.Add(1)
	c.log.WithField("kato_ms", kato).Warn("keep alive timeout: the host stopped sending Keep Alive; tearing the controller down (the host reconnects if it is still alive)")
	c.fatal("keep alive timeout")
}

// sawTraffic records a command for the keep alive timer. Per I/O: one
// load of a line that stays shared, a store once per timer period.
func (c *Controller) sawTraffic() {
	if !c.traffic.Load() {
		c.traffic.Store(true)
	}
}

// keepAlive restarts the keep alive timer.
func (c *Controller) keepAlive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armKeepAlive()
}

func (c *Controller) setKATO(ms uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kato.Store(ms)
	c.armKeepAlive()
}

// submitAER holds r until an event arrives. It reports false when the
// host exceeded the limit.
func (c *Controller) submitAER(r *Request) bool {
	c.mu.Lock()
	if len(c.aers) >= maxOutstandAER {
		c.mu.Unlock()
		return false
	}
	r.q.hold()
	c.aers = append(c.aers, r)
	c.mu.Unlock()
	c.deliverEvents()
	return true
}

// noticeBit is the OAES bit that enables, and masks, a notice.
func noticeBit(info uint8) uint32 {
	switch info {
	case nvme.AsyncNoticeNSChanged:
		return nvme.OAESNSAttrChanged
	case nvme.AsyncNoticeDiscoveryLog:
		return nvme.OAESDiscoveryChange
	case nvme.AsyncNoticeANAChange:
		return nvme.OAESANAChange
	}
	return 0
}

// raiseEvent queues an asynchronous event if the host enabled it. A notice
// is then masked until the host reads its log page (without RAE): one
// event tells the host to look, however many changes follow, as the Linux
// target does. So at most one event of each kind waits here.
func (c *Controller) raiseEvent(typ, info, logPage uint8) {
	c.mu.Lock()
	if typ == nvme.AsyncTypeNotice {
		bit := noticeBit(info)
		if c.aenConfig&bit == 0 || c.aenMasked&bit != 0 {
			c.mu.Unlock()
			return
		}
		c.aenMasked |= bit
	}
	c.events = append(c.events, nvme.AsyncEventResult(typ, info, logPage))
	c.mu.Unlock()
	c.deliverEvents()
}

// logPageRead unmasks the notice a log page reports, unless the host asked
// to retain the event (RAE). Called with c.mu held.
func (c *Controller) logPageRead(info uint8, rae bool) {
	if !rae {
		c.aenMasked &^= noticeBit(info)
	}
}

func (c *Controller) deliverEvents() {
	for {
		c.mu.Lock()
		if len(c.events) == 0 || len(c.aers) == 0 {
			c.mu.Unlock()
			return
		}
		r := c.aers[0]
		c.aers = c.aers[1:]
		ev := c.events[0]
		c.events = c.events[1:]
		c.mu.Unlock()
		r.result = uint64(ev)
		r.q.completeAsync(r)
	}
}

// namespaceChanged records nsid in the Changed Namespace List (once;
// past nvme.ChangedNSMax IDs the list overflows) and raises the event.
func (c *Controller) namespaceChanged(nsid uint32) {
	c.mu.Lock()
	switch {
	case c.nsOverflow || slices.Contains(c.changedNS, nsid):
	case len(c.changedNS) == nvme.ChangedNSMax:
		c.nsOverflow = true
		c.changedNS = c.changedNS[:0]
	default:
		c.changedNS = append(c.changedNS, nsid)
	}
	c.mu.Unlock()
	c.raiseEvent(nvme.AsyncTypeNotice, nvme.AsyncNoticeNSChanged, nvme.LogChangedNS)
}

// changedNSLog writes the Changed Namespace List into page (ChangedNSLogSize
// zeroed bytes); reading it without RAE clears it.
func (c *Controller) changedNSLog(page []byte, rae bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nsOverflow {
		nvme.PutChangedNS(page, 0, nvme.ChangedNSOverflow)
	} else {
		for i, id := range c.changedNS {
			nvme.PutChangedNS(page, i, id)
		}
	}
	if !rae {
		c.changedNS = c.changedNS[:0]
		c.nsOverflow = false
	}
	c.logPageRead(nvme.AsyncNoticeNSChanged, rae)
}

// recordError adds a command that failed on queue q to the error log.
func (c *Controller) recordError(r *Request, q *Queue) {
	qid := q.QID
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errCount++
	e := &c.errLog[c.errCount%errorLogLen]
	*e = nvme.ErrorLogEntry{
		Count: c.errCount, SQID: qid, CID: r.Cmd.CID(), Status: r.status,
		NSID: r.Cmd.NSID(), Transport: q.tr.TRType(),
	}
	if qid != 0 && ioCommands[r.Cmd.Opcode()].lba {
		e.LBA = r.Cmd.SLBA()
	}
}

// smart builds the health page of namespace nsid, or of every namespace
// the host sees for 0 and FFFFFFFFh. Its counters belong to the subsystem,
// so they survive reconnects; power-on time, power cycles and unsafe
// shutdowns belong to the daemon and survive restarts (Target.SetLifetime).
// Data units are thousands of 512-byte units, rounded up.
func (c *Controller) smart(nsid uint32) nvme.SMARTLog {
	s := c.Subsystem
	io, busy := c.healthCounters(nsid)
	var errs uint64
	for _, n := range s.ErrorsByType() {
		errs += n
	}
	life := Lifetime{}
	if t := s.target; t != nil {
		life = t.Lifetime()
	}
	units := nvme.SMARTDataUnits
	return nvme.SMARTLog{
		TemperatureK:     293,
		AvailableSpare:   100,
		SpareThreshold:   10,
		DataUnitsRead:    units(io.BytesRead),
		DataUnitsWritten: units(io.BytesWritten),
		HostReads:        io.Reads,
		HostWrites:       io.Writes,
		BusyMinutes:      busy / uint64(time.Minute),
		PowerCycles:      life.PowerCycles,
		PowerOnHours:     uint64(life.PowerOn / time.Hour),
		UnsafeShutdowns:  life.UnsafeShutdowns,
		ErrorLogEntries:  errs,
	}
}
