package fabrics

import "github.com/nvmeof-tgt/nvmeof-tgt/nvme"

// command is one opcode's entry in the command tables: everything admin
// and I/O dispatch need to know about it, and what the Commands Supported
// and Effects log reports. An opcode whose handler is nil is not
// supported: it completes with Invalid Command Opcode.
type command struct {
	handler func(*Queue, *Request) bool
	dir     DataDir
	// size sets r.Len (and checks the fields it depends on) for commands
	// whose transfer length is not fixedLen.
	size     func(q *Queue, r *Request) nvme.Status
	fixedLen uint32
	// longerData: the data descriptor may be longer than the transfer,
	// the rest ignored. Dataset Management's ranges: the Linux host sends
	// a whole page of them for a single range (nvmet_check_data_len_lte).
	longerData bool
	// needsNS: the NSID must name an active namespace, which the command
	// holds while it runs (I/O commands).
	needsNS bool
	// writes: refused on a write-protected namespace.
	writes bool
	// lba: CDW10-11 hold a starting LBA, which the error log reports.
	lba bool
	// broadcast runs instead of handler when the NSID is FFFFFFFFh
	// (Flush of every namespace); it may block.
	broadcast func(*Queue, *Request) bool
	// discovery: a discovery controller accepts it too (admin commands).
	discovery bool
	// effects are the Commands Supported and Effects bits (CSUPP is added
	// for every supported opcode).
	effects uint32
	// access is the command's class in a reservation's access rules
	// (accessRead, accessWrite); resv marks the reservation commands,
	// which run on the poller and are refused where reservations are off.
	access uint8
	resv   bool
}

// Reservation access classes.
const (
	accessRead  = 1
	accessWrite = 2
)

// supported reports whether the entry is a command the target runs.
func (c *command) supported() bool { return c.handler != nil }

// adminCommands and ioCommands are indexed by opcode, so that dispatch is
// one bounds-check-free load on the I/O path.
var adminCommands = [nvme.Opcodes]command{
	nvme.AdminGetLogPage:  {handler: execGetLogPage, dir: DirCtrlToHost, size: sizeGetLogPage, discovery: true},
	nvme.AdminIdentify:    {handler: execIdentify, dir: DirCtrlToHost, fixedLen: nvme.IdentifySize, discovery: true},
	nvme.AdminAbort:       {handler: execAbort},
	nvme.AdminSetFeatures: {handler: execSetFeatures, discovery: true},
	nvme.AdminGetFeatures: {handler: execGetFeatures, size: sizeGetFeatures, discovery: true},
	nvme.AdminAsyncEvent:  {handler: execAsyncEvent, discovery: true},
	nvme.AdminKeepAlive:   {handler: execKeepAlive, discovery: true},
}

var ioCommands = [nvme.Opcodes]command{
	nvme.IOFlush: {handler: execFlush, needsNS: true, broadcast: execFlushAll, access: accessWrite},
	nvme.IOWrite: {handler: execWrite, dir: DirHostToCtrl, size: sizeBlocks, needsNS: true, writes: true, lba: true,
		effects: nvme.EffectsLBC, access: accessWrite},
	nvme.IORead:    {handler: execRead, dir: DirCtrlToHost, size: sizeBlocks, needsNS: true, lba: true, access: accessRead},
	nvme.IOCompare: {handler: execCompare, dir: DirHostToCtrl, size: sizeBlocks, needsNS: true, lba: true, access: accessRead},
	nvme.IOWriteZeroes: {handler: execWriteZeroes, size: sizeBlocks, needsNS: true, writes: true, lba: true,
		effects: nvme.EffectsLBC, access: accessWrite},
	nvme.IODatasetMgmt: {handler: execDSM, dir: DirHostToCtrl, size: sizeDSM, longerData: true, needsNS: true, writes: true,
		effects: nvme.EffectsLBC, access: accessWrite},
	nvme.IOResvRegister: {handler: execResvRegister, dir: DirHostToCtrl, fixedLen: nvme.ResvRegisterSize, needsNS: true, resv: true},
	nvme.IOResvReport:   {handler: execResvReport, dir: DirCtrlToHost, size: sizeResvReport, needsNS: true, resv: true},
	nvme.IOResvAcquire:  {handler: execResvAcquire, dir: DirHostToCtrl, fixedLen: nvme.ResvAcquireSize, needsNS: true, resv: true},
	nvme.IOResvRelease:  {handler: execResvRelease, dir: DirHostToCtrl, fixedLen: nvme.ResvReleaseSize, needsNS: true, resv: true},
}

// effectsLog is the Commands Supported and Effects log page, built once
// from the command tables.
var effectsLog [nvme.EffectsLogSize]byte

func init() {
	for op := range adminCommands {
		if c := &adminCommands[op]; c.supported() {
			nvme.PutEffects(effectsLog[:], false, uint8(op), nvme.EffectsSupported|c.effects)
		}
	}
	for op := range ioCommands {
		if c := &ioCommands[op]; c.supported() {
			nvme.PutEffects(effectsLog[:], true, uint8(op), nvme.EffectsSupported|c.effects)
		}
	}
}

// use points r at the entry's handler, direction and length.
func (c *command) use(q *Queue, r *Request) nvme.Status {
	r.handler, r.Dir, r.Len, r.longerData = c.handler, c.dir, c.fixedLen, c.longerData
	if c.size != nil {
		return c.size(q, r)
	}
	return 0
}

func sizeGetLogPage(q *Queue, r *Request) nvme.Status { return sizeTo(r, r.Cmd.LogLength()) }

// sizeTo sets r's transfer to the n bytes its command asks for: Invalid
// Field past MaxDataTransfer, which also keeps n within r.Len.
func sizeTo(r *Request, n uint64) nvme.Status {
	if n > MaxDataTransfer {
		return nvme.StatusInvalidField | nvme.DNR
	}
	r.Len = uint32(n)
	return 0
}

// sizeGetFeatures: only Host Identifier returns data, the extended
// 128-bit identifier.
func sizeGetFeatures(q *Queue, r *Request) nvme.Status {
	if r.Cmd.FeatureID() == nvme.FeatHostID && r.Cmd.FeatureValue()&nvme.FeatHostIDExtended != 0 {
		r.Dir, r.Len = DirCtrlToHost, nvme.HostIDExtSize
	}
	return 0
}

// sizeBlocks checks the LBA range of Read, Write, Compare and Write Zeroes
// and sets the byte offset and length; only the commands with data
// transfer it.
func sizeBlocks(q *Queue, r *Request) nvme.Status {
	ns := r.ns
	slba, nlb := r.Cmd.SLBA(), uint64(r.Cmd.NLB())+1
	if blocks := ns.Blocks(); slba >= blocks || nlb > blocks-slba {
		return nvme.StatusLBARange | nvme.DNR
	}
	r.off = int64(slba << ns.BlockShift)
	r.length = int64(nlb << ns.BlockShift)
	if r.Dir == DirNone {
		return 0
	}
	if r.length > MaxDataTransfer {
		return nvme.StatusInvalidField | nvme.DNR
	}
	r.Len = uint32(r.length)
	return 0
}

// sizeDSM: the data is the command's range descriptors.
func sizeDSM(q *Queue, r *Request) nvme.Status {
	r.Len = r.Cmd.DSMRanges() * nvme.DSMRangeSize
	return 0
}
