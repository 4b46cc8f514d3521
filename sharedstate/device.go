package sharedstate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// A block namespace with shared_reservations keeps its reservation in the
// device's last 1 MiB, the reservation area, which both daemons of an HA
// pair read and write (docs/ha-and-gateways.md, "HA with two daemons"). The area's 4 KiB
// blocks:
//
//	0, 3   the record: the reservation state, its sequence number (one
//	       more on every write), the slot of the daemon that wrote it,
//	       and the record it was written on. Odd sequence numbers go to
//	       block 0, even ones to block 3, and a read takes the intact one
//	       with the higher number: a write torn by a crash (a record of
//	       more than one sector) leaves the one before it whole.
//	1+slot each daemon's heartbeat: a counter it bumps every refresh, the
//	       record it enforces, and whether it stopped serving the
//	       namespace cleanly
//
// Every block is read and written with O_DIRECT and O_DSYNC, and written
// in as few logical blocks as it fills: a record of up to 18 registrants
// is one 512-byte sector, which a device writes whole.
const (
	resvAreaBlock  = 4096
	resvFormat     = 1
	resvRecordHead = 60 // bytes before the registrants
	resvRegSize    = 24 // host ID and key
	resvHBSize     = 36
	// resvMaxRegistrants is what fits in the record's block.
	resvMaxRegistrants = (resvAreaBlock - resvRecordHead) / resvRegSize
)

var (
	resvRecordMagic = [8]byte{'N', 'V', 'M', 'F', 'R', 'E', 'S', 'V'}
	resvHBMagic     = [8]byte{'N', 'V', 'M', 'F', 'R', 'H', 'B', 'T'}
	castagnoli      = crc32.MakeTable(crc32.Castagnoli)
)

// resvTimeout is T: a daemon whose refreshes have failed for T refuses
// the namespace's I/O (its lease, T from the start of the last good read,
// has ended), and a peer whose heartbeat has not moved for 2T has stopped
// serving. Refreshes run every T/4. Tests shorten a store's.
var resvTimeout = time.Second

// recordID names one write of the record.
type recordID struct {
	seq    uint64
	writer uint8
}

func (id recordID) String() string { return fmt.Sprintf("%d (slot %d)", id.seq, id.writer) }

// resvClock is the store's time: the system's, or a test's. Now carries
// a monotonic reading, which the waits and the lease are measured on.
// Uptime is the watcher's: it never steps back, and it goes on while the
// system is suspended, which the monotonic reading does not.
type resvClock interface {
	Now() time.Time
	Sleep(time.Duration)
	Uptime() time.Duration
}

type sysResvClock struct{}

func (sysResvClock) Now() time.Time        { return time.Now() }
func (sysResvClock) Sleep(d time.Duration) { time.Sleep(d) }

func (sysResvClock) Uptime() time.Duration {
	var ts unix.Timespec
	// It fails only for a clock the kernel lacks (before Linux 2.6.39):
	// going on would leave the watcher blind.
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(fmt.Sprintf("reading CLOCK_BOOTTIME: %v", err))
	}
	return time.Duration(ts.Nano())
}

// resvDevice is the device under the reservation area.
type resvDevice interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
}

// resvNamespace is what the refresher does to the namespace.
type resvNamespace interface {
	TryReloadReservation() (bool, error)
	ReservationUnavailable() bool
	SetReservationUnavailable(bool)
	SetReservationLease(until time.Time)
}

// sharedResvStore is a fabrics.EnforcingStore on the reservation area of
// one device.
type sharedResvStore struct {
	dev     resvDevice
	name    string // the device, for errors
	base    int64  // offset of the area
	lbs     int    // logical block size: writes are whole ones
	slot    uint8
	timeout time.Duration // T
	clock   resvClock
	log     *logrus.Entry

	// mu orders this daemon's reads and writes of the record with what
	// it enforces. It is never held while waiting for the peer or for the
	// namespace's fence, so the refresher's heartbeat goes on meanwhile.
	mu       sync.Mutex
	lastID   recordID // the record the next write goes on: last loaded or stored
	last     []byte   // that record's bytes, written back over an older one
	lastRead time.Time
	loaded   recordID // the last Load's, until Enforced confirms it
	// enforced is what the heartbeat reports: a record loaded once the
	// namespace fenced the writes it takes access from (Enforced), or one
	// stored (the namespace fenced before storing).
	enforced recordID
	// storing is this daemon's record while its Store waits for the peer:
	// the namespace fenced for it already, so a refresh reading it counts.
	storing recordID

	// The refresher's own (tick).
	beats     uint64
	beatsRead bool // beats went on from the block's count
	failing   bool
	// lastOK is when the last good refresh began (Uptime), for watch.
	lastOK  atomic.Int64
	ns      resvNamespace
	stop    chan struct{}
	running sync.WaitGroup
	closed  bool

	// A reload runs beside the refresher, one at a time (reload).
	reloading     atomic.Bool
	reloads       sync.WaitGroup
	reloadFailing bool // the running reload's own
}

var _ fabrics.EnforcingStore = (*sharedResvStore)(nil)

func (s *sharedResvStore) SharedReservations() {}

// openSharedResv opens the reservation area of the device at path, the
// last config.SharedReservationsArea bytes, for slot. flags are the open
// flags beyond O_RDWR (O_DIRECT|O_DSYNC on a device).
func openSharedResv(path string, flags int, slot int, log *logrus.Entry) (*sharedResvStore, error) {
	f, err := os.OpenFile(path, os.O_RDWR|flags, 0)
	if err != nil {
		return nil, fmt.Errorf("shared_reservations: %w", err)
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err == nil && end < 2*config.SharedReservationsArea {
		err = fmt.Errorf("%d bytes: too small for a %d-byte reservation area", end, config.SharedReservationsArea)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shared_reservations: %s: %w", path, err)
	}
	lbs, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET)
	if err != nil {
		lbs = 512 // a regular file
	}
	s := &sharedResvStore{dev: f, name: path, base: end - config.SharedReservationsArea, lbs: lbs,
		slot: uint8(slot), timeout: resvTimeout, clock: sysResvClock{}, log: log}
	// A beat, clearing a clean stop's flag, before the record is read for
	// the namespace to serve: a peer's change whose record comes after
	// that read then waits for this daemon, and one before it is what the
	// read finds.
	if err := s.beat(false); err != nil {
		f.Close()
		return nil, fmt.Errorf("shared_reservations: %w", err)
	}
	return s, nil
}

// period is P, how often the refresher runs.
func (s *sharedResvStore) period() time.Duration { return s.timeout / 4 }

// alignedBlock is a buffer O_DIRECT takes: n bytes at a 4 KiB boundary.
func alignedBlock(n int) []byte {
	b := make([]byte, n+resvAreaBlock)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % resvAreaBlock); r != 0 {
		off = resvAreaBlock - r
	}
	return b[off : off+n : off+n]
}

func (s *sharedResvStore) readBlock(i int) ([]byte, error) {
	b := alignedBlock(resvAreaBlock)
	if _, err := s.dev.ReadAt(b, s.base+int64(i)*resvAreaBlock); err != nil {
		return nil, fmt.Errorf("reading the reservation area of %s: %w", s.name, err)
	}
	return b, nil
}

// writeBlock writes p at block i, rounded up to whole logical blocks.
func (s *sharedResvStore) writeBlock(i int, p []byte) error {
	n := (len(p) + s.lbs - 1) / s.lbs * s.lbs
	b := alignedBlock(n)
	copy(b, p)
	if _, err := s.dev.WriteAt(b, s.base+int64(i)*resvAreaBlock); err != nil {
		return fmt.Errorf("writing the reservation area of %s: %w", s.name, err)
	}
	return nil
}

// record is the record block: the state, and which write it is.
type record struct {
	id   recordID
	prev recordID // the record it was written on
	st   fabrics.ReservationState
}

// encodeRecord lays out r.
func encodeRecord(r record) ([]byte, error) {
	st := r.st
	if len(st.Registrants) > resvMaxRegistrants {
		return nil, fmt.Errorf("%d registrants: the shared reservation record holds at most %d", len(st.Registrants), resvMaxRegistrants)
	}
	n := resvRecordHead + resvRegSize*len(st.Registrants)
	b := make([]byte, n)
	le := binary.LittleEndian
	copy(b, resvRecordMagic[:])
	le.PutUint16(b[8:], resvFormat)
	b[10], b[11] = r.id.writer, r.prev.writer
	le.PutUint32(b[12:], uint32(n))
	le.PutUint64(b[16:], r.id.seq)
	le.PutUint64(b[24:], r.prev.seq)
	le.PutUint32(b[36:], st.Generation)
	b[40] = st.Type
	if st.PTPL {
		b[41] = 1
	}
	le.PutUint16(b[42:], uint16(len(st.Registrants)))
	copy(b[44:60], st.Holder[:])
	for i, reg := range st.Registrants {
		o := resvRecordHead + i*resvRegSize
		copy(b[o:], reg.HostID[:])
		le.PutUint64(b[o+16:], reg.Key)
	}
	le.PutUint32(b[32:], crc32.Checksum(b, castagnoli))
	return b, nil
}

// decodeRecord reads a record block. A block of zeros is the empty state
// no daemon wrote yet; anything else must be a whole, intact record.
func decodeRecord(b []byte) (record, error) {
	var r record
	if !bytes.Equal(b[:8], resvRecordMagic[:]) {
		if allZero(b) {
			return r, nil
		}
		return r, errors.New("the reservation area holds no reservation record: it held the namespace's data before shared_reservations was set; zero the device's last 1 MiB to start without a reservation")
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[8:]); v != resvFormat {
		return r, fmt.Errorf("reservation record format %d; this daemon reads %d", v, resvFormat)
	}
	n := int(le.Uint32(b[12:]))
	if n < resvRecordHead || n > len(b) {
		return r, fmt.Errorf("reservation record of %d bytes: corrupt", n)
	}
	c := bytes.Clone(b[:n])
	le.PutUint32(c[32:], 0)
	if crc32.Checksum(c, castagnoli) != le.Uint32(b[32:]) {
		return r, errors.New("reservation record checksum mismatch: corrupt")
	}
	count := int(le.Uint16(b[42:]))
	if resvRecordHead+count*resvRegSize != n {
		return r, fmt.Errorf("reservation record: %d registrants in %d bytes: corrupt", count, n)
	}
	r.id = recordID{seq: le.Uint64(b[16:]), writer: b[10]}
	r.prev = recordID{seq: le.Uint64(b[24:]), writer: b[11]}
	st := &r.st
	st.Generation, st.Type, st.PTPL = le.Uint32(b[36:]), b[40], b[41] == 1
	copy(st.Holder[:], b[44:60])
	for i := range count {
		o := resvRecordHead + i*resvRegSize
		var reg fabrics.Registrant
		copy(reg.HostID[:], b[o:o+16])
		reg.Key = le.Uint64(b[o+16:])
		st.Registrants = append(st.Registrants, reg)
	}
	return r, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// heartbeat is one daemon's heartbeat block.
type heartbeat struct {
	count   uint64
	applied recordID
	// stopped: the daemon no longer serves the namespace (it closed the
	// store after its last command), so the peer's changes need not wait
	// for it. It is cleared before a daemon reads the record to serve.
	stopped bool
}

func encodeHeartbeat(slot uint8, hb heartbeat) []byte {
	b := make([]byte, resvHBSize)
	le := binary.LittleEndian
	copy(b, resvHBMagic[:])
	le.PutUint16(b[8:], resvFormat)
	b[10] = slot
	b[11] = hb.applied.writer
	if hb.stopped {
		b[12] = 1
	}
	le.PutUint64(b[16:], hb.count)
	le.PutUint64(b[24:], hb.applied.seq)
	le.PutUint32(b[32:], crc32.Checksum(b, castagnoli))
	return b
}

// decodeHeartbeat reads slot's heartbeat block; zeros are a daemon that
// never ran.
func decodeHeartbeat(b []byte, slot uint8) (heartbeat, error) {
	if allZero(b[:resvHBSize]) {
		return heartbeat{}, nil
	}
	le := binary.LittleEndian
	c := bytes.Clone(b[:resvHBSize])
	le.PutUint32(c[32:], 0)
	if !bytes.Equal(b[:8], resvHBMagic[:]) || b[10] != slot || crc32.Checksum(c, castagnoli) != le.Uint32(b[32:]) {
		return heartbeat{}, fmt.Errorf("heartbeat of slot %d: corrupt", slot)
	}
	return heartbeat{count: le.Uint64(b[16:]), applied: recordID{seq: le.Uint64(b[24:]), writer: b[11]}, stopped: b[12] == 1}, nil
}

// recordBlock is the block the record with sequence number seq goes to.
func recordBlock(seq uint64) int {
	if seq%2 == 1 {
		return 0
	}
	return 3
}

// readRecord reads both record blocks and returns the intact record with
// the higher sequence number; a block of zeros is no record. A damaged
// block beside an intact one is a write torn by a crash, whose command
// never completed (or other damage the daemons' records repair): the
// intact one holds. With no intact record, a damaged block is an error.
func (s *sharedResvStore) readRecord() (record, []byte, error) {
	var best record
	var bestBytes []byte
	var bad error
	for _, i := range []int{0, 3} {
		b, err := s.readBlock(i)
		if err != nil {
			return record{}, nil, err
		}
		r, err := decodeRecord(b)
		switch {
		case err != nil:
			if bad == nil {
				bad = fmt.Errorf("%s: %w", s.name, err)
			}
		case allZero(b):
		case bestBytes == nil || r.id.seq > best.id.seq:
			best, bestBytes = r, b
		}
	}
	if bestBytes == nil && bad != nil {
		return record{}, nil, bad
	}
	return best, bestBytes, nil
}

// current reads the record. One older than the last this daemon loaded
// or stored (the device went back, or a write was lost or torn) is
// replaced by that one: a record never goes back. Called with s.mu held.
func (s *sharedResvStore) current() (record, []byte, error) {
	s.lastRead = s.clock.Now() // before the read: what it returns may be that old
	r, b, err := s.readRecord()
	if err != nil {
		return r, nil, err
	}
	if r.id.seq >= s.lastID.seq || s.last == nil {
		return r, b, nil
	}
	s.log.WithFields(logrus.Fields{"record": r.id.String(), "last": s.lastID.String()}).
		Warn("the shared reservation record went back to an older one; writing back the last one this daemon loaded or stored")
	if err := s.writeBlock(recordBlock(s.lastID.seq), s.last); err != nil {
		return r, nil, err
	}
	r, err = decodeRecord(s.last)
	return r, s.last, err
}

// Load reads the record for the namespace to publish. The heartbeat
// reports it only once the namespace has fenced for it (Enforced).
func (s *sharedResvStore) Load() (fabrics.ReservationState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, b, err := s.current()
	if err != nil {
		return r.st, err
	}
	s.lastID, s.last, s.loaded = r.id, b, r.id
	return r.st, nil
}

// Enforced says the namespace published what Load last returned and
// no write of a host it took access from is left in the backend.
func (s *sharedResvStore) Enforced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enforced = s.loaded
}

// Store writes st as the next record, on the last one loaded or stored,
// and returns once the peer enforces it too (or has stopped serving). A
// record the peer wrote meanwhile, not on ours, is ErrReservationChanged:
// the engine computes the change again on it. The namespace fenced for st
// before storing it, so st is enforced here once stored.
func (s *sharedResvStore) Store(st fabrics.ReservationState) error {
	mine, b, err := s.write(st)
	if err != nil {
		return err
	}
	err = s.awaitPeer(mine)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storing = recordID{}
	if err != nil {
		return err
	}
	// The peer may have written since: on ours (it holds our change),
	// or at our sequence number, over ours.
	r, _, err := s.current()
	if err != nil {
		return err
	}
	if r.id != mine && r.prev != mine {
		return fmt.Errorf("record %v replaced ours, %v: %w", r.id, mine, fabrics.ErrReservationChanged)
	}
	s.lastID, s.last, s.enforced = mine, b, mine
	return nil
}

// write writes st as the record after the last one loaded or stored, on
// a read of it no older than P.
func (s *sharedResvStore) write(st fabrics.ReservationState) (recordID, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		r, _, err := s.current()
		if err != nil {
			return r.id, nil, err
		}
		if r.id != s.lastID {
			return r.id, nil, fmt.Errorf("record %v, not %v, which this daemon last loaded or stored: %w", r.id, s.lastID, fabrics.ErrReservationChanged)
		}
		if s.clock.Now().Sub(s.lastRead) <= s.period() {
			break
		}
		// The read took longer than P: the peer may have written since.
	}
	mine := recordID{seq: s.lastID.seq + 1, writer: s.slot}
	b, err := encodeRecord(record{id: mine, prev: s.lastID, st: st})
	if err == nil {
		err = s.writeBlock(recordBlock(mine.seq), b)
	}
	if err == nil {
		s.storing = mine
	}
	return mine, b, err
}

// awaitPeer waits until the peer's heartbeat shows it enforces mine (or a
// later record), or has not moved for 2T: a daemon whose refreshes fail
// for T refuses I/O, so by 2T the peer enforces nothing stale. The
// peer's record at our sequence number means it wrote over ours, and
// waits for us to enforce its record: ours is lost, the change is
// computed again.
func (s *sharedResvStore) awaitPeer(mine recordID) error {
	peer := 1 - s.slot
	var lastCount uint64
	lastMove := s.clock.Now()
	overwritten := func(id recordID) error {
		if id.seq == mine.seq && id != mine {
			return fmt.Errorf("record %v replaced ours, %v: %w", id, mine, fabrics.ErrReservationChanged)
		}
		return nil
	}
	for first := true; ; first = false {
		if b, err := s.readBlock(1 + int(peer)); err == nil {
			hb, err := decodeHeartbeat(b, peer)
			switch {
			case err != nil:
			case hb.applied == mine || hb.applied.seq > mine.seq:
				return nil
			case hb.stopped:
				s.log.WithFields(logrus.Fields{"record": mine.String(), "peer_slot": peer}).
					Info("the other daemon stopped serving the namespace cleanly; the reservation change completes without it")
				return nil
			case overwritten(hb.applied) != nil:
				return overwritten(hb.applied)
			case first || hb.count != lastCount:
				lastCount, lastMove = hb.count, s.clock.Now()
			}
		}
		if s.clock.Now().Sub(lastMove) >= 2*s.timeout {
			s.log.WithFields(logrus.Fields{"record": mine.String(), "peer_slot": peer}).
				Warn("the other daemon's heartbeat has not moved for twice the timeout: it has stopped serving; the reservation change completes without it")
			return nil
		}
		if b, err := s.readBlock(recordBlock(mine.seq)); err == nil {
			if r, err := decodeRecord(b); err == nil && overwritten(r.id) != nil {
				return overwritten(r.id)
			}
		}
		s.clock.Sleep(s.period() / 5)
	}
}

// refresh reads the record, has the namespace reload it if the peer
// changed it, and beats. It returns when the read began and whether the
// namespace enforces the record read.
func (s *sharedResvStore) refresh() (time.Time, bool, error) {
	s.mu.Lock()
	r, _, err := s.current()
	readStart := s.lastRead
	storing := s.storing.seq != 0 && r.id == s.storing
	changed := r.id != s.lastID && !storing
	enforced := r.id == s.enforced || storing
	s.mu.Unlock()
	if err != nil {
		return readStart, false, err
	}
	if changed {
		s.reload()
	}
	if err := s.beat(false); err != nil {
		return readStart, false, err
	}
	return readStart, enforced, nil
}

// reload has the namespace load the record and enforce it, beside the
// refresher: enforcing waits for the writes of the hosts that lost
// access, however long that takes, and the heartbeat goes on meanwhile
// (with the record enforced before), or the peer would count this daemon
// gone after 2T while such a write can still land. One runs at a time;
// the next refresh starts another if the record is still ahead.
func (s *sharedResvStore) reload() {
	if !s.reloading.CompareAndSwap(false, true) {
		return
	}
	s.reloads.Add(1)
	go func() {
		defer s.reloads.Done()
		defer s.reloading.Store(false)
		// Not reloaded (false): a change holds the namespace and learns
		// the record itself.
		_, err := s.ns.TryReloadReservation()
		if err != nil && !s.reloadFailing {
			s.log.WithError(err).Warn("reloading the shared reservation record failed; retrying")
		}
		s.reloadFailing = err != nil
	}()
}

// beat writes this daemon's heartbeat: the next count and the record the
// namespace enforces, and whether the daemon stopped serving it.
func (s *sharedResvStore) beat(stopped bool) error {
	if err := s.checkOwnBeat(); err != nil {
		return err
	}
	s.mu.Lock()
	hb := heartbeat{count: s.beats + 1, applied: s.enforced, stopped: stopped}
	s.mu.Unlock()
	if err := s.writeBlock(1+int(s.slot), encodeHeartbeat(s.slot, hb)); err != nil {
		return err
	}
	s.beats++
	return nil
}

// checkOwnBeat reads this daemon's heartbeat block: it goes on from the
// count a previous run left, and a count it did not write means the
// other daemon has the same slot, and neither would wait for the other.
func (s *sharedResvStore) checkOwnBeat() error {
	b, err := s.readBlock(1 + int(s.slot))
	if err != nil {
		return err
	}
	hb, err := decodeHeartbeat(b, s.slot)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", s.name, err)
	case !s.beatsRead:
		s.beats, s.beatsRead = hb.count, true
	case hb.count != s.beats:
		return fmt.Errorf("%s: another daemon writes the heartbeat of slot %d: set shared_reservations.slot to 0 on one daemon and 1 on the other", s.name, s.slot)
	}
	return nil
}

// tick runs one refresh. One whose record the namespace enforces renews
// the lease and serves the namespace again; one whose record it has yet
// to enforce (a reload still fencing, or a change holding the namespace)
// does neither.
func (s *sharedResvStore) tick() {
	began := s.clock.Uptime()
	readStart, enforced, err := s.refresh()
	if err != nil {
		if !s.failing {
			s.log.WithError(err).Warn("refreshing the shared reservation record failed; retrying")
		}
		s.failing = true
		return
	}
	s.failing = false
	if !enforced {
		return
	}
	// A change the peer wrote after the read began completes without
	// this daemon once its heartbeat has stood still for 2T (awaitPeer):
	// T after this lease ends. One written before, the read found.
	s.ns.SetReservationLease(readStart.Add(s.timeout))
	s.lastOK.Store(int64(began))
	if s.ns.ReservationUnavailable() {
		s.log.Info("the namespace enforces the shared reservation record read again; it serves I/O")
		s.ns.SetReservationUnavailable(false)
	}
}

// watch turns the namespace away once no refresh has read a record it
// enforces for T: what it enforces may be stale by then. It runs beside
// the refreshes, which a device that stopped answering holds up.
func (s *sharedResvStore) watch() {
	since := s.clock.Uptime() - time.Duration(s.lastOK.Load())
	if since >= s.timeout && !s.ns.ReservationUnavailable() {
		s.log.WithFields(logrus.Fields{"since": since, "timeout": s.timeout}).
			Error("no refresh has read a shared reservation record the namespace enforces within the timeout (the device does not answer, or the namespace still waits for writes the other daemon's change took access from); the namespace answers ANA Inaccessible until one does")
		s.ns.SetReservationUnavailable(true)
	}
}

// attach gives the refresher ns, which has the store set and serves no
// host yet: it enforces what it loaded (SetReservationStore, which does
// not call Enforced), for T from that read.
func (s *sharedResvStore) attach(ns resvNamespace) {
	s.mu.Lock()
	s.enforced = s.loaded
	until := s.lastRead.Add(s.timeout)
	s.mu.Unlock()
	s.ns = ns
	s.lastOK.Store(int64(s.clock.Uptime()))
	ns.SetReservationLease(until)
}

// start begins refreshing for ns (attach), and watching the refreshes.
func (s *sharedResvStore) start(ns resvNamespace) {
	s.attach(ns)
	s.stop = make(chan struct{})
	s.running.Add(2)
	every := func(f func()) {
		defer s.running.Done()
		t := time.NewTicker(s.period())
		defer t.Stop()
		for {
			f()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}
	go every(s.tick)
	go every(s.watch)
}

// Close stops the refresher, says in the heartbeat that this daemon
// stopped serving the namespace, and closes the device. It is called once
// no command can reach the namespace (the namespace drained, or it never
// served), so the peer's changes then complete without waiting 2T for
// this daemon. A daemon that dies without Close leaves them the 2T.
func (s *sharedResvStore) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.stop != nil {
		close(s.stop)
		s.running.Wait()
		s.stop = nil
	}
	s.reloads.Wait() // none starts once the refresher stopped
	if err := s.beat(true); err != nil {
		s.log.WithError(err).Warn("could not tell the other daemon that this one stopped serving the namespace; its reservation changes wait 2T")
	}
	return s.dev.Close()
}

// DeviceArea is what the namespace's block device keeps out of the
// namespace for the reservation area.
func DeviceArea(nc config.Namespace) int64 {
	if !nc.SharedReservations.On {
		return 0
	}
	return config.SharedReservationsArea
}

// setupSharedReservations gives the namespace the store on its device's
// reservation area, with what the record holds, and starts refreshing.
func setupSharedReservations(ns *fabrics.Namespace, nqn string, nc config.Namespace, log *logrus.Entry) error {
	log = log.WithFields(logrus.Fields{"subsystem": nqn, "nsid": nc.NSID, "slot": nc.SharedReservations.Slot})
	st, err := openSharedResv(nc.Path, unix.O_DIRECT|unix.O_DSYNC, nc.SharedReservations.Slot, log)
	if err != nil {
		return err
	}
	if err := ns.SetReservationStore(st); err != nil {
		st.Close()
		return fmt.Errorf("shared_reservations: %w", err)
	}
	st.start(ns)
	return nil
}
