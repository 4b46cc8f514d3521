package fabrics

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Version is the firmware revision reported in Identify; set by main.
var Version = "0.1.0"

// prepareAdmin dispatches an admin command through adminCommands.
func (q *Queue) prepareAdmin(r *Request) nvme.Status {
	if !q.ctrl.enabled() {
		// Before CC.EN=1 (or after a reset) only Fabrics commands are
		// processed, as the Linux target's nvmet_check_ctrl_status.
		return nvme.StatusCommandSequence | nvme.DNR
	}
	c := &adminCommands[r.Cmd.Opcode()]
	if !c.supported() || (q.ctrl.Subsystem.isDiscovery && !c.discovery) {
		return nvme.StatusInvalidOpcode | nvme.DNR
	}
	return c.use(q, r)
}

// The temperature thresholds reported (Kelvin), as the Linux target's.
const (
	warningTempK  = 0x157
	criticalTempK = 0x175
)

func execKeepAlive(q *Queue, r *Request) bool {
	q.ctrl.keepAlive()
	return true
}

func execAsyncEvent(q *Queue, r *Request) bool {
	if !q.ctrl.submitAER(r) {
		r.status = nvme.StatusAsyncLimit | nvme.DNR
		return true
	}
	return false
}

// execAbort ends the named command if it waits on a namespace's QoS
// limit, the one place a command may wait long. Any other runs to
// completion quickly, and the host then waits for it: it is not aborted.
func execAbort(q *Queue, r *Request) bool {
	r.result = nvme.AbortNotAborted
	sqid := r.Cmd.AbortSQID()
	if sqid == 0 {
		return true
	}
	c := q.ctrl
	c.mu.Lock()
	var target *Queue
	if int(sqid) < len(c.queues) {
		target = c.queues[sqid]
	}
	c.mu.Unlock()
	if target != nil && target.abortWaiter(r.Cmd.AbortCID()) {
		r.result = 0
	}
	return true
}

func execIdentify(q *Queue, r *Request) bool {
	cmd := r.Cmd
	c := q.ctrl
	s := c.Subsystem
	b := r.Data
	clear(b)
	if s.isDiscovery && cmd.CNS() != nvme.CNSController {
		r.status = nvme.StatusInvalidField | nvme.DNR
		return true
	}
	switch cmd.CNS() {
	case nvme.CNSController:
		q.identifyController(b)
	case nvme.CNSNamespace:
		nsid := cmd.NSID()
		if nsid == 0 || nsid == nvme.NSIDBroadcast {
			r.status = nvme.StatusInvalidNamespace | nvme.DNR
			return true
		}
		// An inactive namespace ID reads as all zeros.
		if ns := c.visibleNamespace(nsid); ns != nil {
			identifyNamespace(ns, b)
		}
	case nvme.CNSActiveNSList:
		after := cmd.NSID()
		if after >= nvme.NSIDListLimit {
			r.status = nvme.StatusInvalidNamespace | nvme.DNR
			return true
		}
		var ids [nvme.IdentifySize / 4]uint32
		n := 0
		for _, id := range c.visibleNamespaceIDs() {
			if id > after && n < len(ids) {
				ids[n] = id
				n++
			}
		}
		nvme.PutNSIDList(b, ids[:n])
	case nvme.CNSNSDescList:
		ns := c.visibleNamespace(cmd.NSID())
		if ns == nil {
			r.status = nvme.StatusInvalidNamespace | nvme.DNR
			return true
		}
		off := nvme.PutNSDescriptor(b, 0, nvme.NIDTUUID, ns.UUID[:])
		off = nvme.PutNSDescriptor(b, off, nvme.NIDTNGUID, ns.UUID[:])
		eui := ns.EUI64()
		off = nvme.PutNSDescriptor(b, off, nvme.NIDTEUI64, eui[:])
		nvme.PutNSDescriptor(b, off, nvme.NIDTCSI, []byte{nvme.CSINVM})
	case nvme.CNSCSINamespace, nvme.CNSCSIController:
		// The NVM command set's specific structures: nothing beyond the
		// defaults, which read as zeros.
		if cmd.IdentifyCSI() != nvme.CSINVM {
			r.status = nvme.StatusInvalidField | nvme.DNR
		}
	case nvme.CNSCSIActiveNSList:
		if cmd.IdentifyCSI() != nvme.CSINVM {
			r.status = nvme.StatusInvalidField | nvme.DNR
			return true
		}
		var ids []uint32
		for _, id := range c.visibleNamespaceIDs() {
			if id > cmd.NSID() {
				ids = append(ids, id)
			}
		}
		nvme.PutNSIDList(b, ids)
	case nvme.CNSCommandSetVector:
		nvme.PutCommandSetVector(b)
	default:
		r.status = nvme.StatusInvalidField | nvme.DNR
	}
	return true
}

func (q *Queue) identifyController(b []byte) {
	c := q.ctrl
	s := c.Subsystem
	id := nvme.IdentifyController{
		Serial:         s.Serial,
		Model:          s.Model,
		Firmware:       Version,
		CNTLID:         c.ID,
		Version:        nvme.Version(1, 3, 0),
		MDTS:           mdtsShift,
		KAS:            1, // 100 ms granularity
		MaxCmd:         c.Port.MaxQueueSize,
		SubNQN:         s.NQN,
		ACL:            3,
		AERL:           maxOutstandAER - 1,
		LPA:            nvme.LPAExtendedData,
		ELPE:           errorLogLen - 1,
		IOCCSZ:         (nvme.CommandSize + q.port.InlineDataSize) / nvme.CapsuleUnit,
		IORCSZ:         nvme.CompletionSize / nvme.CapsuleUnit,
		SGLS:           nvme.SGLSSupported,
		PowerMaxCentiW: 0,
	}
	if q.tr.TRType() == nvme.TransportRDMA {
		// Keyed SGLs (host memory keys) and descriptor lists are RDMA's;
		// a TCP capsule carries one descriptor of transport data.
		id.SGLS |= nvme.SGLSKeyed
		id.MSDBD = MaxKeyedDescriptors
	} else {
		id.MSDBD = 1
	}
	if q.port.InlineDataSize > 0 {
		id.SGLS |= nvme.SGLSOffset
	}
	if s.isDiscovery {
		id.ControllerType = nvme.ControllerDiscovery
		id.OAES = nvme.OAESDiscoveryChange
	} else {
		id.ControllerType = nvme.ControllerIO
		// Several ports, several controllers, and ANA reporting, as the
		// Linux target: the host's multipath reads the ANA log.
		id.CMIC = nvme.CMICMultiPort | nvme.CMICMultiController | nvme.CMICANA
		id.OAES = nvme.OAESNSAttrChanged | nvme.OAESANAChange
		// Every state; ANAGRPID may change while attached (a reload moves
		// a namespace to another group in place), so bit 6 stays clear.
		id.ANACAP = nvme.ANACAPOptimized | nvme.ANACAPNonOptimized | nvme.ANACAPInaccessible |
			nvme.ANACAPPersistentLoss | nvme.ANACAPChange
		id.ANATT = anaTransitionTime
		id.ANAGRPMAX = nvme.MaxANAGroups
		id.NANAGRPID = nvme.MaxANAGroups
		// The SMART log per namespace too, as the Linux target's.
		id.LPA |= nvme.LPACmdEffects | nvme.LPAPerNamespaceSMART
		id.FRMW = 1<<1 | 1 // one slot, slot 1 read-only
		id.NN = nvme.MaxNamespaces
		id.MNAN = nvme.MaxNamespaces
		id.ONCS = nvme.ONCSDSM | nvme.ONCSWriteZeroes | nvme.ONCSCompare | nvme.ONCSReservations
		if c.vwc {
			// Present, and Flush takes the broadcast NSID.
			id.VWC = nvme.VWCPresent | nvme.VWCFlushBroadcast
		}
		id.FUSES = 1 // Compare and Write
		// Fabrics host IDs are 128 bits: the Linux host then reads
		// reservations with the extended data structure.
		id.CTRATT = nvme.CTRATTHostID128
		id.WCTEMP, id.CCTEMP = warningTempK, criticalTempK
	}
	id.Encode(b)
}

func identifyNamespace(ns *Namespace, b []byte) {
	id := nvme.IdentifyNamespace{
		Blocks:       ns.Blocks(),
		BlockShift:   ns.BlockShift,
		NMIC:         nvme.NMICShared,
		ANAGroupID:   ns.ANAGroup(),
		WriteProtect: ns.ReadOnly,
		NSFEAT:       nvme.NSFEATThinProvisioning,
		DLFEAT:       nvme.DLFEATWriteZeroesDeallocate,
	}
	if ns.traits.DiscardZeroes {
		id.DLFEAT |= nvme.DLFEATReadsZeroes
	}
	id.RESCAP = ns.reservationCaps()
	copy(id.NGUID[:], ns.UUID[:])
	id.EUI64 = ns.EUI64()
	id.Encode(b)
}

func execGetLogPage(q *Queue, r *Request) bool {
	cmd := r.Cmd
	c := q.ctrl
	page := q.scratch[:0]
	switch lid := cmd.LogID(); {
	case lid == nvme.LogDiscovery && c.Subsystem.isDiscovery:
		page = q.discoveryLog(page)
		c.mu.Lock()
		c.logPageRead(nvme.AsyncNoticeDiscoveryLog, cmd.LogRAE())
		c.mu.Unlock()
	case c.Subsystem.isDiscovery:
		r.status = nvme.StatusInvalidLogPage | nvme.DNR
		return true
	case lid == nvme.LogError:
		page = grow(page, nvme.ErrorLogEntrySize*errorLogLen)
		c.mu.Lock()
		// Newest first.
		for i := 0; i < errorLogLen && uint64(i) < c.errCount; i++ {
			e := c.errLog[(c.errCount-uint64(i))%errorLogLen]
			e.Encode(page[i*nvme.ErrorLogEntrySize:])
		}
		c.mu.Unlock()
	case lid == nvme.LogSMART:
		if nsid := cmd.NSID(); nsid != 0 && nsid != nvme.NSIDBroadcast && c.visibleNamespace(nsid) == nil {
			// As the Linux target: a namespace the host cannot see
			// has no health page.
			r.status = nvme.StatusInvalidNamespace | nvme.DNR
			return true
		}
		page = grow(page, nvme.SMARTLogSize)
		smart := c.smart(cmd.NSID())
		smart.Encode(page)
	case lid == nvme.LogFirmwareSlot:
		page = grow(page, nvme.FirmwareLogSize)
		page[nvme.FirmwareAFI] = 1 // running from slot 1
		nvme.PutString(page[nvme.FirmwareSlotOff:][:nvme.FirmwareRevSize], Version)
	case lid == nvme.LogChangedNS:
		page = grow(page, nvme.ChangedNSLogSize)
		c.changedNSLog(page, cmd.LogRAE())
	case lid == nvme.LogCmdEffects:
		page = append(page, effectsLog[:]...)
	case lid == nvme.LogReservation:
		page = grow(page, nvme.ResvLogSize)
		c.resvLogPage(page)
	case lid == nvme.LogANA:
		page = q.anaLog(page, cmd.LogSpecific()&nvme.ANALogRGO != 0)
		c.mu.Lock()
		c.logPageRead(nvme.AsyncNoticeANAChange, cmd.LogRAE())
		c.mu.Unlock()
	default:
		r.status = nvme.StatusInvalidLogPage | nvme.DNR
		return true
	}
	q.scratch = page
	off := cmd.LogOffset()
	if off&3 != 0 || off > uint64(len(page)) {
		r.status = nvme.StatusInvalidField | nvme.DNR
		return true
	}
	n := copy(r.Data, page[off:])
	clear(r.Data[n:])
	return true
}

// grow returns b resized to n zeroed bytes, reusing its storage.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		b = make([]byte, n)
	}
	b = b[:n]
	clear(b)
	return b
}

func execSetFeatures(q *Queue, r *Request) bool {
	cmd := r.Cmd
	c := q.ctrl
	if cmd.FeatureSave() {
		r.status = nvme.StatusFeatureNotSaveable | nvme.DNR
		return true
	}
	v := cmd.FeatureValue()
	switch fid := cmd.FeatureID(); {
	case fid == nvme.FeatKeepAlive:
		c.setKATO(v)
	case fid == nvme.FeatAsyncEvent:
		c.mu.Lock()
		c.aenConfig = v
		c.mu.Unlock()
	case c.Subsystem.isDiscovery:
		r.status = nvme.StatusInvalidField | nvme.DNR
	case fid == nvme.FeatNumQueues:
		nsq, ncq, ok := nvme.NumQueues(v)
		if !ok {
			r.status = nvme.StatusInvalidField | nvme.DNR
			return true
		}
		// The host gets at most the subsystem's max_io_queues, and no more
		// than the daemon-wide queue pair limit has room for now: fewer
		// queues rather than a refused connect (at least one: the count
		// is 0-based).
		n := min(min(nsq, ncq)+1, uint32(c.maxIOQueues))
		if free := q.target.freeQueuePairs(); free >= 0 {
			n = max(min(n, uint32(free)), 1)
		}
		c.mu.Lock()
		c.ioQueues = uint16(n)
		c.mu.Unlock()
		r.result = uint64(nvme.NumQueuesValue(n-1, n-1))
	case fid == nvme.FeatVolatileWC:
		return setWriteCache(q, r, v&1 != 0)
	case fid == nvme.FeatArbitration, fid == nvme.FeatPowerMgmt,
		fid == nvme.FeatTempThreshold, fid == nvme.FeatErrorRecovery, fid == nvme.FeatWriteAtomic:
		// Accepted; the target's behaviour does not depend on them.
	case fid == nvme.FeatHostID:
		// The host identifier comes with Connect on fabrics.
		r.status = nvme.StatusCommandSequence | nvme.DNR
	case fid == nvme.FeatResvMask, fid == nvme.FeatResvPersist:
		return setResvFeature(q, r)
	default:
		r.status = nvme.StatusInvalidField | nvme.DNR
	}
	return true
}

func execGetFeatures(q *Queue, r *Request) bool {
	cmd := r.Cmd
	c := q.ctrl
	switch fid := cmd.FeatureID(); {
	case fid == nvme.FeatKeepAlive:
		r.result = uint64(c.kato.Load())
	case fid == nvme.FeatAsyncEvent:
		c.mu.Lock()
		r.result = uint64(c.aenConfig)
		c.mu.Unlock()
	case c.Subsystem.isDiscovery:
		r.status = nvme.StatusInvalidField
	case fid == nvme.FeatNumQueues:
		c.mu.Lock()
		n := uint32(c.ioQueues - 1)
		c.mu.Unlock()
		r.result = uint64(nvme.NumQueuesValue(n, n))
	case fid == nvme.FeatVolatileWC:
		if !c.vwc {
			r.status = nvme.StatusInvalidField
			return true
		}
		if !c.writeThrough.Load() {
			r.result = 1
		}
	case fid == nvme.FeatTempThreshold:
		r.result = warningTempK
	case fid == nvme.FeatArbitration, fid == nvme.FeatPowerMgmt,
		fid == nvme.FeatErrorRecovery, fid == nvme.FeatWriteAtomic:
		r.result = 0
	case fid == nvme.FeatResvMask, fid == nvme.FeatResvPersist:
		getResvFeature(q, r)
	case fid == nvme.FeatHostID:
		if cmd.FeatureValue()&nvme.FeatHostIDExtended == 0 {
			// Only the 128-bit identifier exists on fabrics.
			r.status = nvme.StatusInvalidField
			return true
		}
		copy(r.Data, c.HostID[:])
	default:
		// Without DNR: nvme-cli's get-feature walks every ID and stops at
		// any status but a plain Invalid Field.
		r.status = nvme.StatusInvalidField
	}
	return true
}

// setWriteCache enables or disables the controller's volatile write cache.
// Disabled, every write of this controller is durable before it completes
// (other controllers keep theirs), and what was cached is flushed before
// the command completes: the host now relies on it being on media. A
// controller that reported no cache refuses, as the feature does not exist.
func setWriteCache(q *Queue, r *Request, enable bool) bool {
	c := q.ctrl
	if !c.vwc {
		r.status = nvme.StatusInvalidField | nvme.DNR
		return true
	}
	wasThrough := c.writeThrough.Swap(!enable)
	if enable || wasThrough {
		return true
	}
	q.hold()
	q.target.background(func() {
		r.status = ioStatus(c.flushNamespaces(), true)
		q.completeAsync(r)
	})
	return false
}
