//go:build !norbd && cgo

package backend

/*
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <rados/librados.h>

// A watch on the lease object: a peer that releases the lease notifies
// the object, and every gateway's watch hears it at once.
extern void leaseNotified(uintptr_t arg);

struct lease_watch {
	rados_ioctx_t io;
	char *oid;
	uintptr_t arg;
};

static void lease_watch_cb(void *arg, uint64_t notify_id, uint64_t handle, uint64_t notifier_id,
			   void *data, size_t len) {
	struct lease_watch *w = arg;
	rados_notify_ack(w->io, w->oid, notify_id, handle, NULL, 0);
	leaseNotified(w->arg);
}

// A broken watch (a lost connection, a blocklisted client): the lease
// falls back on trying at each renewal interval.
static void lease_watch_err(void *arg, uint64_t handle, int err) {}

static int lease_watch(struct lease_watch *w, uint64_t *handle) {
	return rados_watch2(w->io, w->oid, handle, lease_watch_cb, lease_watch_err, w);
}

static int lease_notify(rados_ioctx_t io, const char *oid, uint64_t timeout_ms) {
	char *reply = NULL;
	size_t len = 0;
	int r = rados_notify2(io, oid, NULL, 0, timeout_ms, &reply, &len);
	if (reply)
		rados_buffer_free(reply);
	return r;
}

// lease_record sets (or, with val NULL, empties) the holder's attribute in
// one write op with cls_lock's assert_locked (assert, its encoded
// arguments): the OSD applies the attribute only while the lock is ours.
static int lease_record(rados_ioctx_t io, const char *oid, const char *assert, size_t assert_len,
			const char *key, const char *val, size_t val_len) {
	rados_write_op_t op = rados_create_write_op();
	int prval = 0;
	rados_write_op_exec(op, "lock", "assert_locked", assert, assert_len, &prval);
	rados_write_op_setxattr(op, key, val ? val : "", val_len);
	int r = rados_write_op_operate(op, io, oid, NULL, 0);
	rados_release_write_op(op);
	return r;
}

// object_replace replaces the whole object with data and sets key to
// version in one write op: if old is NULL only when the object does not
// exist yet, else only while key holds old (-ECANCELED, -EEXIST when not).
static int object_replace(rados_ioctx_t io, const char *oid, const char *key, const char *old,
			  const char *version, const char *data, size_t len) {
	rados_write_op_t op = rados_create_write_op();
	int prval = 0;
	if (old)
		rados_write_op_cmpxattr(op, key, LIBRADOS_CMPXATTR_OP_EQ, old, strlen(old));
	else
		rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
	rados_write_op_write_full(op, data, len);
	rados_write_op_setxattr(op, key, version, strlen(version));
	int r = rados_write_op_operate(op, io, oid, NULL, 0);
	rados_release_write_op(op);
	(void)prval;
	return r;
}

static int lease_lock_shared(rados_ioctx_t io, const char *oid, const char *name, const char *cookie,
			     const char *desc, long ms) {
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	return rados_lock_shared(io, oid, name, cookie, "", desc, &tv, LIBRADOS_LOCK_FLAG_MAY_RENEW);
}

static int lease_lock(rados_ioctx_t io, const char *oid, const char *name, const char *cookie,
		      const char *desc, long ms, int flags) {
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	return rados_lock_exclusive(io, oid, name, cookie, desc, &tv, (uint8_t)flags);
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// RadosLease is an exclusive RADOS lock with a duration on one object:
// an ANA group's lease between the daemons of a gateway pair. It goes
// through the same cluster connection as the rbd namespaces opened with
// the same conf, user and keyring, so that blocklisting this client's
// address fences their writes too. The object also records the holder in
// an extended attribute, which outlives the lock so that whoever takes
// the lock after it expired knows whom to fence.
type RadosLease struct {
	conn     *radosConn
	ioctx    C.rados_ioctx_t
	object   string
	cookie   string
	duration time.Duration

	fenceFor time.Duration // how long a Fence's blocklist entry lasts

	watch    *C.struct_lease_watch // nil: not watching
	handle   C.uint64_t
	notifyID uintptr // the key of the callback in leaseWatchers
}

// leaseWatchers maps a watch's key to what its notifications call.
var (
	leaseWatchMu   sync.Mutex
	leaseWatchers  = map[uintptr]func(){}
	leaseWatchNext uintptr
)

// leaseNotifiedGo runs a watch's callback (called from librados' thread
// through leaseNotified); it must not block.
func leaseNotifiedGo(key uintptr) {
	leaseWatchMu.Lock()
	f := leaseWatchers[key]
	leaseWatchMu.Unlock()
	if f != nil {
		f()
	}
}

// Watch calls notified, from librados' thread, whenever someone notifies
// the lease object (Notify). The object must exist (ENOENT otherwise).
// notified must not block.
func (l *RadosLease) Watch(notified func()) error {
	if l.watch != nil {
		return nil
	}
	leaseWatchMu.Lock()
	leaseWatchNext++
	key := leaseWatchNext
	leaseWatchers[key] = notified
	leaseWatchMu.Unlock()
	w := (*C.struct_lease_watch)(C.malloc(C.sizeof_struct_lease_watch))
	w.io, w.oid, w.arg = l.ioctx, C.CString(l.object), C.uintptr_t(key)
	if r := C.lease_watch(w, &l.handle); r < 0 {
		C.free(unsafe.Pointer(w.oid))
		C.free(unsafe.Pointer(w))
		leaseWatchMu.Lock()
		delete(leaseWatchers, key)
		leaseWatchMu.Unlock()
		return errnoOf(r)
	}
	l.watch, l.notifyID = w, key
	return nil
}

// Notify tells the watchers of the lease object (a release), waiting for
// their acknowledgement up to one second.
func (l *RadosLease) Notify() error {
	oid := C.CString(l.object)
	defer C.free(unsafe.Pointer(oid))
	if r := C.lease_notify(l.ioctx, oid, 1000); r < 0 {
		return errnoOf(r)
	}
	return nil
}

// The lock's name and the holder's attribute on the lease object.
const (
	leaseLockName = "nvmeof-tgt.gateway"
	leaseHolder   = "nvmeof-tgt.holder"
)

// OpenRadosLease opens the lease on object in o.Pool (and o.Namespace),
// through the cluster connection for o.Conf, o.User and o.Keyring.
func OpenRadosLease(o RBDOptions, object, cookie string, duration time.Duration) (*RadosLease, error) {
	conn, err := connect(o)
	if err != nil {
		return nil, fmt.Errorf("gateway lease %s/%s: %w", o.Pool, object, err)
	}
	l := &RadosLease{conn: conn, object: object, cookie: cookie, duration: duration,
		fenceFor: blocklistExpiry(confValue(conn.cluster, "rados_osd_op_timeout"), duration)}
	cpool := C.CString(o.Pool)
	defer C.free(unsafe.Pointer(cpool))
	if r := C.rados_ioctx_create(conn.cluster, cpool, &l.ioctx); r < 0 {
		conn.release()
		if r == -C.ENOENT {
			return nil, fmt.Errorf("gateway lease %s/%s: pool %q does not exist", o.Pool, object, o.Pool)
		}
		return nil, fmt.Errorf("gateway lease %s/%s: open pool: %w", o.Pool, object, syscall.Errno(-r))
	}
	if o.Namespace != "" {
		cns := C.CString(o.Namespace)
		C.rados_ioctx_set_namespace(l.ioctx, cns)
		C.free(unsafe.Pointer(cns))
	}
	return l, nil
}

// WatchError is the watch's error: nil while it is registered with the
// OSD and its pings answered, ENOTCONN without a watch, another errno
// once it broke (the connection to the OSD lost, the object's placement
// changed, a timeout), after which no notification reaches it: Unwatch,
// then Watch again.
func (l *RadosLease) WatchError() error {
	if l.watch == nil {
		return syscall.ENOTCONN
	}
	if r := C.rados_watch_check(l.ioctx, l.handle); r < 0 {
		return errnoOf(r)
	}
	return nil
}

// Unwatch ends the watch, if any.
func (l *RadosLease) Unwatch() {
	if l.watch == nil {
		return
	}
	C.rados_unwatch2(l.ioctx, l.handle)
	// No callback runs after this: the watch's memory can go.
	C.rados_watch_flush(l.conn.cluster)
	C.free(unsafe.Pointer(l.watch.oid))
	C.free(unsafe.Pointer(l.watch))
	l.watch = nil
	leaseWatchMu.Lock()
	delete(leaseWatchers, l.notifyID)
	leaseWatchMu.Unlock()
}

// Close releases the ioctx and the connection (the lock stays until it
// expires or is released).
func (l *RadosLease) Close() {
	l.Unwatch()
	releaseIOCtx(&l.ioctx, &l.conn)
}

func errnoOf(r C.int) error { return syscall.Errno(-r) }

// Lock takes or extends the lock for the lease's duration. With renew it
// must be held by this client and cookie already: ENOENT if it is not.
// EBUSY: another holds it. ESHUTDOWN: this client is blocklisted.
func (l *RadosLease) Lock(renew bool) error {
	flags := C.LIBRADOS_LOCK_FLAG_MAY_RENEW
	if renew {
		flags = C.LIBRADOS_LOCK_FLAG_MUST_RENEW
	}
	oid, name, cookie, desc := C.CString(l.object), C.CString(leaseLockName), C.CString(l.cookie), C.CString("nvmeof-tgt gateway lease")
	defer C.free(unsafe.Pointer(oid))
	defer C.free(unsafe.Pointer(name))
	defer C.free(unsafe.Pointer(cookie))
	defer C.free(unsafe.Pointer(desc))
	if r := C.lease_lock(l.ioctx, oid, name, cookie, desc, C.long(l.duration.Milliseconds()), C.int(flags)); r < 0 {
		return errnoOf(r)
	}
	return nil
}

// Unlock releases the lock if this client and cookie hold it.
func (l *RadosLease) Unlock() error {
	oid, name, cookie := C.CString(l.object), C.CString(leaseLockName), C.CString(l.cookie)
	defer C.free(unsafe.Pointer(oid))
	defer C.free(unsafe.Pointer(name))
	defer C.free(unsafe.Pointer(cookie))
	if r := C.rados_unlock(l.ioctx, oid, name, cookie); r < 0 && r != -C.ENOENT {
		return errnoOf(r)
	}
	return nil
}

// Holder is the holder recorded in the object: "" if none (or no object).
func (l *RadosLease) Holder() (string, error) {
	oid, key := C.CString(l.object), C.CString(leaseHolder)
	defer C.free(unsafe.Pointer(oid))
	defer C.free(unsafe.Pointer(key))
	var buf [1024]C.char
	r := C.rados_getxattr(l.ioctx, oid, key, &buf[0], C.size_t(len(buf)))
	switch {
	case r == -C.ENOENT || r == -C.ENODATA:
		return "", nil
	case r < 0:
		return "", errnoOf(r)
	}
	return C.GoStringN(&buf[0], r), nil
}

// SetHolder records v as the holder; "" clears the record (an empty
// value). It applies only while this client and cookie hold the lock,
// unexpired: EBUSY or ENOENT otherwise, and the record is left as it was.
// So a release that lost the lock cannot clear the next owner's record,
// and a taker whose lock expired cannot record itself over it.
func (l *RadosLease) SetHolder(v string) error {
	oid, key := C.CString(l.object), C.CString(leaseHolder)
	defer C.free(unsafe.Pointer(oid))
	defer C.free(unsafe.Pointer(key))
	assert := assertLocked(leaseLockName, l.cookie)
	ca := C.CBytes(assert)
	defer C.free(ca)
	var cv *C.char
	if v != "" {
		cv = C.CString(v)
		defer C.free(unsafe.Pointer(cv))
	}
	if r := C.lease_record(l.ioctx, oid, (*C.char)(ca), C.size_t(len(assert)), key, cv, C.size_t(len(v))); r < 0 {
		return errnoOf(r)
	}
	return nil
}

// assertLocked encodes cls_lock's assert_locked arguments (struct
// cls_lock_assert_op, version 1): the lock's name, its type (exclusive),
// our cookie and the tag, empty as rados_lock_exclusive leaves it.
func assertLocked(name, cookie string) []byte {
	var body []byte
	str := func(s string) {
		body = binary.LittleEndian.AppendUint32(body, uint32(len(s)))
		body = append(body, s...)
	}
	str(name)
	body = append(body, 1) // LOCK_EXCLUSIVE
	str(cookie)
	str("")             // tag
	out := []byte{1, 1} // struct version, oldest compatible version
	out = binary.LittleEndian.AppendUint32(out, uint32(len(body)))
	return append(out, body...)
}

// Self is this client's address as the OSD holding the lock saw it (the
// address a blocklist entry must name): the lockers' entry with our
// cookie. ENOENT if we do not hold the lock.
func (l *RadosLease) Self() (string, error) {
	cookies, addrs, err := l.lockers()
	if err != nil {
		return "", err
	}
	if i := slices.Index(cookies, l.cookie); i >= 0 {
		return addrs[i], nil
	}
	return "", syscall.ENOENT
}

// LockShared takes or extends a shared lock on the object for the lease's
// duration, under the lease's cookie: one of many holders, as each
// gateway of a group holds the group's membership object.
func (l *RadosLease) LockShared() error {
	oid, name, cookie, desc := C.CString(l.object), C.CString(leaseLockName), C.CString(l.cookie), C.CString("nvmeof-tgt gateway member")
	defer C.free(unsafe.Pointer(oid))
	defer C.free(unsafe.Pointer(name))
	defer C.free(unsafe.Pointer(cookie))
	defer C.free(unsafe.Pointer(desc))
	if r := C.lease_lock_shared(l.ioctx, oid, name, cookie, desc, C.long(l.duration.Milliseconds())); r < 0 {
		return errnoOf(r)
	}
	return nil
}

// Lockers are the cookies of the lock's unexpired holders (cls_lock drops
// the expired ones as it reads the lock); none if there is no object.
func (l *RadosLease) Lockers() ([]string, error) {
	cookies, _, err := l.lockers()
	if errors.Is(err, syscall.ENOENT) {
		return nil, nil
	}
	return cookies, err
}

// lockers lists the lock's holders: their cookies and client addresses.
func (l *RadosLease) lockers() (cookies, addrs []string, err error) {
	oid, name := C.CString(l.object), C.CString(leaseLockName)
	defer C.free(unsafe.Pointer(oid))
	defer C.free(unsafe.Pointer(name))
	var exclusive C.int
	var tag, clients, cs, as [4096]C.char
	tagLen, clientsLen, cookiesLen, addrsLen := C.size_t(len(tag)), C.size_t(len(clients)), C.size_t(len(cs)), C.size_t(len(as))
	n := C.rados_list_lockers(l.ioctx, oid, name, &exclusive, &tag[0], &tagLen,
		&clients[0], &clientsLen, &cs[0], &cookiesLen, &as[0], &addrsLen)
	if n < 0 {
		return nil, nil, errnoOf(C.int(n))
	}
	cookies = strings.Split(C.GoStringN(&cs[0], C.int(cookiesLen)), "\x00")
	addrs = strings.Split(C.GoStringN(&as[0], C.int(addrsLen)), "\x00")
	k := min(int(n), len(cookies), len(addrs))
	return cookies[:k], addrs[:k], nil
}

// maxObjectBytes bounds what ReadAll reads: a gateway group's
// configuration is kilobytes.
const maxObjectBytes = 8 << 20

// ReadAll reads the whole object; ENOENT if there is none.
func (l *RadosLease) ReadAll() ([]byte, error) {
	oid := C.CString(l.object)
	defer C.free(unsafe.Pointer(oid))
	buf := make([]byte, maxObjectBytes+1)
	r := C.rados_read(l.ioctx, oid, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), 0)
	switch {
	case r < 0:
		return nil, errnoOf(r)
	case int(r) > maxObjectBytes:
		return nil, fmt.Errorf("object %s is over %d bytes", l.object, maxObjectBytes)
	}
	return buf[:r], nil
}

// Replace writes data as the whole object and sets attribute key to
// version, in one operation that applies only while key holds old (the
// object must not exist yet if old is ""): ECANCELED or EEXIST otherwise,
// the object untouched. A compare-and-set for a versioned object.
func (l *RadosLease) Replace(key, old, version string, data []byte) error {
	oid, ck, cv := C.CString(l.object), C.CString(key), C.CString(version)
	defer C.free(unsafe.Pointer(oid))
	defer C.free(unsafe.Pointer(ck))
	defer C.free(unsafe.Pointer(cv))
	var co *C.char
	if old != "" {
		co = C.CString(old)
		defer C.free(unsafe.Pointer(co))
	}
	cd := C.CBytes(data)
	defer C.free(cd)
	if r := C.object_replace(l.ioctx, oid, ck, co, cv, (*C.char)(cd), C.size_t(len(data))); r < 0 {
		return errnoOf(r)
	}
	return nil
}

// blocklistExpiry is how long a fenced client stays blocklisted: the
// fenced client may resend a write it has queued until its
// rados_osd_op_timeout (opTimeout, in seconds; 0: no limit) runs out, and
// the entry must outlast that, and the lease, by a wide margin, whatever
// the cluster's mon_osd_blocklist_default_expire says. Ten times both, and
// at least an hour; a day without an operation timeout.
func blocklistExpiry(opTimeout string, lease time.Duration) time.Duration {
	sec, err := strconv.ParseFloat(strings.TrimSpace(opTimeout), 64)
	if err != nil || sec <= 0 {
		return 24 * time.Hour
	}
	return max(time.Hour, 10*(time.Duration(sec*float64(time.Second))+lease)).Round(time.Second)
}

// Fence blocklists addr (for blocklistExpiry) and waits for the OSD map
// that has the entry: our next ops carry its epoch, so no OSD runs one of
// ours before it refuses addr's.
func (l *RadosLease) Fence(addr string) error {
	ca := C.CString(addr)
	defer C.free(unsafe.Pointer(ca))
	if r := C.rados_blocklist_add(l.conn.cluster, ca, C.uint32_t(l.fenceFor/time.Second)); r < 0 {
		return fmt.Errorf("osd blocklist add %s: %w", addr, errnoOf(r))
	}
	if r := C.rados_wait_for_latest_osdmap(l.conn.cluster); r < 0 {
		return fmt.Errorf("waiting for the OSD map after blocklisting %s: %w", addr, errnoOf(r))
	}
	return nil
}
