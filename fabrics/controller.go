package fabrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// Limits advertised to hosts.
const (
	maxIOQueues    = 128
	maxOutstandAER = 4 // AERL+1
	errorLogLen    = 64
	// controllerTimeout is CAP.TO in 500 ms units: how long the host waits
	// for CSTS.RDY to follow CC.EN.
	controllerTimeout = 15 * 2
)

// Controller is the state one host's Connect on an admin queue creates:
// the registers the host drives (CC, CSTS), keep alive, asynchronous
// events, features and the queues bound to it.
type Controller struct {
	ID        uint16
	Subsystem *Subsystem
	HostNQN   string
	HostID    [16]byte
	Port      *Port
	Created   time.Time
	log       *logrus.Entry

	// vwc: the controller reported a volatile write cache (Identify VWC),
	// fixed at creation. writeThrough: every write must be durable before
	// it completes, because no cache was reported or the host disabled it
	// (Set Features Volatile Write Cache), so the host will not flush.
	vwc          bool
	writeThrough atomic.Bool

	cc   atomic.Uint32
	csts atomic.Uint32
	kato atomic.Uint32 // milliseconds; 0 disables keep alive

	mu        sync.Mutex
	queues    []*Queue // by queue ID; [0] is the admin queue
	ioQueues  uint16   // I/O queues granted by Set Features
	aers      []*Request
	events    []uint32 // raised while no AER was outstanding
	aenConfig uint32
	changedNS []uint32
	errLog    [errorLogLen]nvme.ErrorLogEntry
	errCount  uint64
	kaTimer   *time.Timer
	dead      bool
}

func newController(s *Subsystem, q *Queue, d nvme.ConnectData, kato uint32) *Controller {
	c := &Controller{
		Subsystem: s,
		HostNQN:   d.HostNQN,
		HostID:    d.HostID,
		Port:      q.port,
		Created:   time.Now(),
		queues:    make([]*Queue, maxIOQueues+1),
		ioQueues:  maxIOQueues,
	}
	c.kato.Store(kato)
	c.vwc = s.volatileCache()
	c.writeThrough.Store(!c.vwc)
	return c
}

// Ready reports CSTS.RDY.
func (c *Controller) Ready() bool { return c.csts.Load()&nvme.CSTSReady != 0 }

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

func (c *Controller) propertyGet(off uint32, size8 bool) (uint64, nvme.Status) {
	switch {
	case off == nvme.RegCAP && size8:
		mqes := uint16(c.Port.MaxQueueSize - 1)
		return nvme.CAP(mqes, controllerTimeout), 0
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

// setCC runs the controller state machine for a CC write: enabling checks
// the queue entry sizes the host asks for, disabling resets the controller
// (its I/O queues go away), and a shutdown notification completes at once
// because every write already reached the backend when it completed.
func (c *Controller) setCC(v uint32) {
	old := c.cc.Swap(v)
	csts := c.csts.Load()
	if v&nvme.CCEnable != 0 && old&nvme.CCEnable == 0 {
		iosqes := (v >> nvme.CCIOSQEShift) & 0xf
		iocqes := (v >> nvme.CCIOCQEShift) & 0xf
		mps := (v >> nvme.CCMPSShift) & 0xf
		ams := (v >> nvme.CCAMSShift) & 0x7
		css := (v >> nvme.CCCSSShift) & 0x7
		if iosqes != 6 || iocqes != 4 || mps != 0 || ams != 0 || css != 0 {
			c.log.WithField("cc", v).Warn("host enabled controller with unsupported CC settings; reporting controller fatal status")
			c.csts.Store(csts | nvme.CSTSFatal)
			return
		}
		csts = csts&^nvme.CSTSShstMask | nvme.CSTSReady
		c.log.Info("controller enabled")
	}
	if v&nvme.CCEnable == 0 && old&nvme.CCEnable != 0 {
		csts &^= nvme.CSTSReady
		c.log.Info("controller disabled")
		c.dropIOQueues()
	}
	if v&nvme.CCShnMask != 0 && old&nvme.CCShnMask == 0 {
		csts = csts&^nvme.CSTSShstMask | nvme.CSTSShstComplete
		c.log.Info("host shut the controller down")
	}
	if v&nvme.CCShnMask == 0 && old&nvme.CCShnMask != 0 {
		csts &^= nvme.CSTSShstMask
	}
	c.csts.Store(csts)
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
	if c.queues[q.QID] != nil {
		return nvme.StatusCommandSequence | nvme.DNR
	}
	c.queues[q.QID] = q
	if q.QID == 0 {
		c.startKeepAlive()
	}
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
			q.outstanding.Add(-1)
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
func (c *Controller) destroy(reason string) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	c.dead = true
	if c.kaTimer != nil {
		c.kaTimer.Stop()
	}
	var qs []*Queue
	for _, q := range c.queues {
		if q != nil {
			qs = append(qs, q)
		}
	}
	c.mu.Unlock()
	c.Subsystem.removeController(c)
	for _, q := range qs {
		q.tr.Disconnect()
	}
	c.log.WithField("reason", reason).Info("controller removed")
}

// fatal reports a controller fatal status and disconnects every queue; the
// host recovers by reconnecting.
func (c *Controller) fatal(reason string) {
	c.csts.Store(c.csts.Load() | nvme.CSTSFatal)
	c.destroy(reason)
}

func (c *Controller) startKeepAlive() {
	kato := c.kato.Load()
	if kato == 0 {
		return
	}
	// Allow the host's transport some slack, as the Linux target does.
	d := time.Duration(kato)*time.Millisecond + time.Second
	c.kaTimer = time.AfterFunc(d, func() {
		c.Subsystem.Stats.KeepAliveExpired.Add(1)
		c.log.WithField("kato_ms", kato).Warn("keep alive timeout: the host stopped sending Keep Alive; tearing the controller down (the host reconnects if it is still alive)")
		c.fatal("keep alive timeout")
	})
}

// keepAlive restarts the keep alive timer.
func (c *Controller) keepAlive() {
	kato := c.kato.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kaTimer != nil && kato != 0 {
		c.kaTimer.Reset(time.Duration(kato)*time.Millisecond + time.Second)
	}
}

func (c *Controller) setKATO(ms uint32) {
	c.kato.Store(ms)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kaTimer != nil {
		c.kaTimer.Stop()
		c.kaTimer = nil
	}
	if !c.dead {
		c.startKeepAlive()
	}
}

// submitAER holds r until an event arrives. It reports false when the
// host exceeded the limit.
func (c *Controller) submitAER(r *Request) bool {
	c.mu.Lock()
	if len(c.aers) >= maxOutstandAER {
		c.mu.Unlock()
		return false
	}
	r.q.outstanding.Add(1)
	c.aers = append(c.aers, r)
	c.mu.Unlock()
	c.deliverEvents()
	return true
}

// raiseEvent queues an asynchronous event if the host enabled it.
func (c *Controller) raiseEvent(typ, info, logPage uint8) {
	if typ == nvme.AsyncTypeNotice {
		var bit uint32
		switch info {
		case nvme.AsyncNoticeNSChanged:
			bit = nvme.OAESNSAttrChanged
		case nvme.AsyncNoticeDiscoveryLog:
			bit = nvme.OAESDiscoveryChange
		}
		c.mu.Lock()
		enabled := c.aenConfig&bit != 0
		c.mu.Unlock()
		if !enabled {
			return
		}
	}
	c.mu.Lock()
	c.events = append(c.events, uint32(typ)|uint32(info)<<8|uint32(logPage)<<16)
	c.mu.Unlock()
	c.deliverEvents()
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

func (c *Controller) namespaceChanged(nsid uint32) {
	c.mu.Lock()
	if len(c.changedNS) < 1024 {
		c.changedNS = append(c.changedNS, nsid)
	}
	c.mu.Unlock()
	c.raiseEvent(nvme.AsyncTypeNotice, nvme.AsyncNoticeNSChanged, nvme.LogChangedNS)
}

// recordError adds a failed command to the error log.
func (c *Controller) recordError(r *Request, qid uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errCount++
	e := &c.errLog[c.errCount%errorLogLen]
	*e = nvme.ErrorLogEntry{
		Count: c.errCount, SQID: qid, CID: r.Cmd.CID(), Status: r.status,
		NSID: r.Cmd.NSID(),
	}
	if op := r.Cmd.Opcode(); qid != 0 && (op == nvme.IORead || op == nvme.IOWrite || op == nvme.IOCompare || op == nvme.IOWriteZeroes) {
		e.LBA = r.Cmd.SLBA()
	}
}
