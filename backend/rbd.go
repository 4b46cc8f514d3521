//go:build !norbd && cgo

package backend

/*
#cgo LDFLAGS: -ldl
#include <errno.h>
#include <stdlib.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <rbd/features.h>

int nt_ceph_load(const char *rados, const char *rbd, char *err, size_t errlen); // ceph_dl.c

// rbdAioDone is Go's (rbd_callback.go): librbd calls it from its own
// thread when an asynchronous operation completes.
extern void rbdAioDone(rbd_completion_t c, void *arg);

static int aio_start(rbd_image_t img, int op, uint64_t off, size_t len, char *buf, uintptr_t arg) {
	rbd_completion_t c;
	int r = rbd_aio_create_completion((void *)arg, (rbd_callback_t)rbdAioDone, &c);
	if (r < 0)
		return r;
	switch (op) {
	case 0:
		r = rbd_aio_read(img, off, len, buf, c);
		break;
	case 1:
		r = rbd_aio_write(img, off, len, buf, c);
		break;
	default:
		r = rbd_aio_flush(img, c);
	}
	if (r < 0)
		rbd_aio_release(c);
	return r;
}

static int create_image(rados_ioctx_t io, const char *name, uint64_t size) {
	rbd_image_options_t opts;
	rbd_image_options_create(&opts);
	int r = rbd_create4(io, name, size, opts);
	rbd_image_options_destroy(opts);
	return r;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

func init() { Register("rbd", openRBD) }

// rbdBackend serves a namespace from a Ceph RBD image through librbd.
// Reads, writes and flushes go through librbd's asynchronous calls
// (AsyncIO); the other calls block until the OSDs answer, so they run on
// the queue's workers. librbd's cache is off (rbd_cache=false on every
// connection): a write completes once the OSDs have it on stable media,
// so there is no volatile cache to report and FUA needs nothing more.
type rbdBackend struct {
	// mu guards conn, ioctx and image against Reconnect's swap for the
	// calls outside the I/O path (Resize on a reload, a Flush, the
	// reservation metadata), which may run while the group is drained.
	// The I/O path takes no lock: its commands are counted in flight
	// before their ANA check, and Reconnect runs only once they are done.
	mu        sync.RWMutex
	conn      *radosConn
	ioctx     C.rados_ioctx_t
	image     C.rbd_image_t
	size      atomic.Int64
	blockSize uint32
	readOnly  bool
	name      string     // pool/[namespace/]image, for messages
	opts      RBDOptions // to reopen the image (Reconnect)
}

// Timeouts set on every connection unless ceph.conf sets them: they bound
// how long a start-up waits for the monitors and an I/O for the OSDs, so
// that a lost cluster fails I/O with a retryable status instead of
// holding it until the host gives up on the controller. Ceph's own
// defaults are 300 s for the mount and no limit for operations.
var rbdTimeouts = []struct{ key, cephDefault, ours string }{
	{"client_mount_timeout", "300", "10"},
	{"rados_mon_op_timeout", "0", "10"},
	{"rados_osd_op_timeout", "0", "10"},
}

// radosConn is one cluster connection, shared by the namespaces that
// reach the cluster with the same conf, user, keyring and Client.
type radosConn struct {
	key     rbdConnKey
	cluster C.rados_t
	refs    int
}

type rbdConnKey struct{ conf, user, keyring, client string }

var (
	radosMu    sync.Mutex
	radosConns = map[rbdConnKey]*radosConn{}
)

// rbdError describes a failed librbd or librados call; it unwraps to the
// errno so that callers map it like any other I/O error.
func rbdError(op, name string, ret C.int) error {
	return &os.PathError{Op: op, Path: "rbd:" + name, Err: syscall.Errno(-ret)}
}

// clientName is the cephx entity name: "client." and the user.
func clientName(user string) string {
	switch {
	case user == "":
		return "client.admin"
	case strings.HasPrefix(user, "client."):
		return user
	}
	return "client." + user
}

var (
	cephOnce sync.Once
	cephErr  error
)

// loadCeph loads Ceph's client libraries, once (ceph_dl.c).
func loadCeph() error {
	cephOnce.Do(func() { cephErr = loadCephLibs("librados.so.2", "librbd.so.1") })
	return cephErr
}

// loadCephLibs loads the libraries of those file names.
func loadCephLibs(rados, rbd string) error {
	cr, cb := C.CString(rados), C.CString(rbd)
	defer C.free(unsafe.Pointer(cr))
	defer C.free(unsafe.Pointer(cb))
	var msg [512]C.char
	if C.nt_ceph_load(cr, cb, &msg[0], C.size_t(len(msg))) != 0 {
		return fmt.Errorf("cannot load Ceph's client libraries (on Debian: apt install librados2 librbd1): %s", C.GoString(&msg[0]))
	}
	return nil
}

// connect returns a connection to the cluster o describes, connecting
// first if none is open.
func connect(o RBDOptions) (*radosConn, error) {
	key := rbdConnKey{o.Conf, clientName(o.User), o.Keyring, o.Client}
	radosMu.Lock()
	defer radosMu.Unlock()
	if c := radosConns[key]; c != nil {
		c.refs++
		return c, nil
	}
	if err := loadCeph(); err != nil {
		return nil, err
	}
	c := &radosConn{key: key, refs: 1}
	cname := C.CString(key.user)
	defer C.free(unsafe.Pointer(cname))
	if r := C.rados_create2(&c.cluster, nil, cname, 0); r < 0 {
		return nil, fmt.Errorf("ceph client %s: %w", key.user, syscall.Errno(-r))
	}
	fail := func(err error) (*radosConn, error) {
		C.rados_shutdown(c.cluster)
		return nil, err
	}
	if o.Conf != "" {
		cconf := C.CString(o.Conf)
		r := C.rados_conf_read_file(c.cluster, cconf)
		C.free(unsafe.Pointer(cconf))
		if r < 0 {
			return fail(fmt.Errorf("ceph.conf %s: %w", o.Conf, syscall.Errno(-r)))
		}
	} else if r := C.rados_conf_read_file(c.cluster, nil); r < 0 {
		return fail(fmt.Errorf("ceph.conf (searched in the default places): %w", syscall.Errno(-r)))
	}
	set := func(k, v string) error {
		ck, cv := C.CString(k), C.CString(v)
		defer C.free(unsafe.Pointer(ck))
		defer C.free(unsafe.Pointer(cv))
		if r := C.rados_conf_set(c.cluster, ck, cv); r < 0 {
			return fmt.Errorf("ceph option %s=%s: %w", k, v, syscall.Errno(-r))
		}
		return nil
	}
	opts := [][2]string{{"rbd_cache", "false"}}
	if o.Keyring != "" {
		opts = append(opts, [2]string{"keyring", o.Keyring})
	}
	for _, t := range rbdTimeouts {
		if confIs(c.cluster, t.key, t.cephDefault) {
			opts = append(opts, [2]string{t.key, t.ours})
		}
	}
	for _, kv := range opts {
		if err := set(kv[0], kv[1]); err != nil {
			return fail(err)
		}
	}
	if r := C.rados_connect(c.cluster); r < 0 {
		return fail(connectError(key, confValue(c.cluster, "client_mount_timeout"), syscall.Errno(-r)))
	}
	radosConns[key] = c
	return c, nil
}

// connectError explains a failed rados_connect.
func connectError(key rbdConnKey, timeout string, errno syscall.Errno) error {
	conf := key.conf
	if conf == "" {
		conf = "the default ceph.conf"
	}
	switch errno {
	case syscall.ETIMEDOUT:
		return fmt.Errorf("cannot reach the Ceph monitors listed in %s within client_mount_timeout (%ss): %w", conf, timeout, errno)
	case syscall.EACCES, syscall.EPERM:
		return fmt.Errorf("the Ceph monitors refused %s: check its key (keyring %q) and caps: %w", key.user, key.keyring, errno)
	case syscall.ENOENT:
		return fmt.Errorf("no keyring with a key for %s (keyring %q): %w", key.user, key.keyring, errno)
	}
	return fmt.Errorf("connecting to the Ceph cluster of %s as %s: %w", conf, key.user, errno)
}

func confValue(cluster C.rados_t, key string) string {
	var buf [64]C.char
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	if C.rados_conf_get(cluster, ck, &buf[0], C.size_t(len(buf))) < 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

// confIs reports whether key holds the number want (Ceph prints some as
// "300", others as "300.000000").
func confIs(cluster C.rados_t, key, want string) bool {
	have, err1 := strconv.ParseFloat(strings.TrimSpace(confValue(cluster, key)), 64)
	w, err2 := strconv.ParseFloat(want, 64)
	return err1 == nil && err2 == nil && have == w
}

func (c *radosConn) release() {
	radosMu.Lock()
	defer radosMu.Unlock()
	if c.refs--; c.refs == 0 {
		if radosConns[c.key] == c { // not retired
			delete(radosConns, c.key)
		}
		C.rados_shutdown(c.cluster)
	}
}

// releaseIOCtx destroys an I/O context and then gives back the connection
// it was made on; either may be nil, and both are nil after.
func releaseIOCtx(ioctx *C.rados_ioctx_t, conn **radosConn) {
	if *ioctx != nil {
		C.rados_ioctx_destroy(*ioctx)
		*ioctx = nil
	}
	if *conn != nil {
		(*conn).release()
		*conn = nil
	}
}

// RetireClient makes the next open with o's conf, user, keyring and
// Client connect a new client instance (a new global id, which a
// blocklist entry for the old one does not name). The old connection
// stays open for those that use it until they close or Reconnect.
func RetireClient(o RBDOptions) {
	radosMu.Lock()
	defer radosMu.Unlock()
	delete(radosConns, rbdConnKey{o.Conf, clientName(o.User), o.Keyring, o.Client})
}

// Reconnect reopens the image on the connection its options name now (a
// new client instance after RetireClient), then closes the old image and
// releases the old connection. The caller sees that no I/O is in flight
// on the namespace or starts meanwhile (the gateway group inaccessible
// and drained): the I/O path reads the image without a lock. On an error
// the old image stays.
func (b *rbdBackend) Reconnect() error {
	conn, err := connect(b.opts)
	if err != nil {
		return fmt.Errorf("rbd:%s: %w", b.name, err)
	}
	nb := &rbdBackend{conn: conn, blockSize: b.blockSize, readOnly: b.readOnly, name: b.name}
	if err := nb.open(b.opts, 0); err != nil {
		nb.Close()
		return err
	}
	b.mu.Lock()
	old := &rbdBackend{conn: b.conn, ioctx: b.ioctx, image: b.image, name: b.name}
	b.conn, b.ioctx, b.image = nb.conn, nb.ioctx, nb.image
	b.mu.Unlock()
	// The old client is blocklisted: its close fails, which changes
	// nothing for the new one. No call holds the old image any more.
	old.Close()
	return nil
}

func openRBD(opts Options) (Backend, error) {
	o := opts.RBD
	if o.Pool == "" || o.Image == "" {
		return nil, errors.New("rbd backend: pool and image are required")
	}
	name := o.Pool + "/" + o.Image
	if o.Namespace != "" {
		name = o.Pool + "/" + o.Namespace + "/" + o.Image
	}
	bs := opts.BlockSize
	if bs == 0 {
		bs = 512
	}
	conn, err := connect(o)
	if err != nil {
		return nil, fmt.Errorf("rbd:%s: %w", name, err)
	}
	b := &rbdBackend{conn: conn, blockSize: bs, readOnly: opts.ReadOnly, name: name, opts: o}
	b.opts.Create = false // a reopen finds the image
	if err := b.open(o, opts.Size); err != nil {
		b.Close()
		return nil, err
	}
	if _, err := b.Resize(0); err != nil {
		b.Close()
		return nil, err
	}
	if b.size.Load() == 0 {
		b.Close()
		return nil, fmt.Errorf("rbd:%s: smaller than one %d-byte block", name, bs)
	}
	return b, nil
}

// open opens the pool and the image, creating the image if asked to.
func (b *rbdBackend) open(o RBDOptions, size int64) error {
	cpool := C.CString(o.Pool)
	defer C.free(unsafe.Pointer(cpool))
	if r := C.rados_ioctx_create(b.conn.cluster, cpool, &b.ioctx); r < 0 {
		b.ioctx = nil
		if r == -C.ENOENT {
			return fmt.Errorf("rbd:%s: pool %q does not exist", b.name, o.Pool)
		}
		return rbdError("open pool", b.name, r)
	}
	if o.Namespace != "" {
		cns := C.CString(o.Namespace)
		C.rados_ioctx_set_namespace(b.ioctx, cns)
		C.free(unsafe.Pointer(cns))
	}
	cimg := C.CString(o.Image)
	defer C.free(unsafe.Pointer(cimg))
	openImage := func() C.int {
		if b.readOnly {
			return C.rbd_open_read_only(b.ioctx, cimg, &b.image, nil)
		}
		return C.rbd_open(b.ioctx, cimg, &b.image, nil)
	}
	r := openImage()
	if r == -C.ENOENT && o.Create && !b.readOnly && size > 0 {
		if r = C.create_image(b.ioctx, cimg, C.uint64_t(size)); r < 0 && r != -C.EEXIST {
			b.image = nil
			return rbdError("create image", b.name, r)
		}
		r = openImage()
	}
	switch {
	case r == -C.ENOENT && o.Namespace != "":
		b.image = nil
		return fmt.Errorf("rbd:%s: no image %q in RADOS namespace %q of pool %q (or no such namespace; set create: true and size to create the image)", b.name, o.Image, o.Namespace, o.Pool)
	case r == -C.ENOENT:
		b.image = nil
		return fmt.Errorf("rbd:%s: no image %q in pool %q (set create: true and size to create it)", b.name, o.Image, o.Pool)
	case r < 0:
		b.image = nil
		return rbdError("open image", b.name, r)
	}
	if o.ExclusiveLock {
		return b.checkExclusiveLock()
	}
	return nil
}

// checkExclusiveLock refuses an image without the exclusive-lock feature.
func (b *rbdBackend) checkExclusiveLock() error {
	var features C.uint64_t
	if r := C.rbd_get_features(b.image, &features); r < 0 {
		return rbdError("get features", b.name, r)
	}
	if features&C.RBD_FEATURE_EXCLUSIVE_LOCK == 0 {
		return fmt.Errorf("rbd:%s: the image lacks the exclusive-lock feature, which an image in a gateway group needs so that librbd hands its writes over between gateways in order (rbd feature enable %s exclusive-lock)", b.name, b.name)
	}
	return nil
}

// ptr is the address of p's first byte, for librbd; p is not empty.
func ptr(p []byte) *C.char { return (*C.char)(unsafe.Pointer(&p[0])) }

func (b *rbdBackend) ReadAt(p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	n := C.rbd_read(b.image, C.uint64_t(off), C.size_t(len(p)), ptr(p))
	if n < 0 {
		return rbdError("read", b.name, C.int(n))
	}
	// Past the end of an image that shrank under the namespace: zeros.
	clear(p[n:])
	return nil
}

func (b *rbdBackend) WriteAt(p []byte, off int64) error {
	if b.readOnly {
		return b.readOnlyError("write")
	}
	if len(p) == 0 {
		return nil
	}
	n := C.rbd_write(b.image, C.uint64_t(off), C.size_t(len(p)), ptr(p))
	switch {
	case n < 0:
		return rbdError("write", b.name, C.int(n))
	case int(n) != len(p):
		// librbd writes all or fails; a short count means the image
		// ended (shrank) under the write.
		return rbdError("write", b.name, -C.ENOSPC)
	}
	return nil
}

// The asynchronous calls (AsyncIO): librbd completes them on its own
// thread, through rbdAioDone.
const (
	aioRead = iota
	aioWrite
	aioFlush
)

func (b *rbdBackend) startAsync(op int, p []byte, off int64, sink *AsyncSink, tag uint32) error {
	var buf *C.char
	if len(p) > 0 {
		buf = ptr(p)
	}
	if r := C.aio_start(b.image, C.int(op), C.uint64_t(off), C.size_t(len(p)), buf, C.uintptr_t(asyncArg(sink, tag))); r < 0 {
		return rbdError([...]string{"aio read", "aio write", "aio flush"}[op], b.name, r)
	}
	return nil
}

func (b *rbdBackend) ReadAsync(p []byte, off int64, sink *AsyncSink, tag uint32) error {
	return b.startAsync(aioRead, p, off, sink, tag)
}

func (b *rbdBackend) WriteAsync(p []byte, off int64, sink *AsyncSink, tag uint32) error {
	if b.readOnly {
		return b.readOnlyError("write")
	}
	return b.startAsync(aioWrite, p, off, sink, tag)
}

func (b *rbdBackend) FlushAsync(sink *AsyncSink, tag uint32) error {
	return b.startAsync(aioFlush, nil, 0, sink, tag)
}

// Flush: with the cache off there is nothing to write back, but
// rbd_flush still waits for writes librbd has in flight.
func (b *rbdBackend) Flush() error {
	if b.readOnly {
		return nil
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if r := C.rbd_flush(b.image); r < 0 {
		return rbdError("flush", b.name, r)
	}
	return nil
}

// Discard deallocates what librbd can: rbd_discard leaves parts smaller
// than rbd_discard_granularity_bytes (64 KiB by default) as they were,
// so a discarded range is not promised to read zeros (see Traits).
func (b *rbdBackend) Discard(off, length int64) error {
	if b.readOnly {
		return b.readOnlyError("discard")
	}
	if r := C.rbd_discard(b.image, C.uint64_t(off), C.uint64_t(length)); r < 0 {
		return rbdError("discard", b.name, r)
	}
	return nil
}

// WriteZeroes zeroes the range exactly: whole objects are removed or
// truncated, partial ones zeroed, and the range reads back as zeros.
func (b *rbdBackend) WriteZeroes(off, length int64) error {
	if b.readOnly {
		return b.readOnlyError("write zeroes")
	}
	// rbd_write_zeroes takes a size_t length and returns it as ssize_t:
	// ranges over 1 GiB go in pieces.
	for length > 0 {
		n := min(length, 1<<30)
		if r := C.rbd_write_zeroes(b.image, C.uint64_t(off), C.size_t(n), 0, 0); r < 0 {
			return rbdError("write zeroes", b.name, C.int(r))
		}
		off, length = off+n, length-n
	}
	return nil
}

func (b *rbdBackend) Size() int64       { return b.size.Load() }
func (b *rbdBackend) BlockSize() uint32 { return b.blockSize }

// resizeHook, if set (tests only), runs in Resize with the image held.
var resizeHook func()

// Resize reads the image's size again (after `rbd resize`, say); the size
// asked for is ignored, as for block devices.
func (b *rbdBackend) Resize(int64) (int64, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if resizeHook != nil {
		resizeHook()
	}
	var size C.uint64_t
	if r := C.rbd_get_size(b.image, &size); r < 0 {
		return b.size.Load(), rbdError("get size", b.name, r)
	}
	n := int64(size) - int64(size)%int64(b.blockSize)
	b.size.Store(n)
	return n, nil
}

// Traits: no volatile cache (see rbdBackend); a discard may leave data.
func (b *rbdBackend) Traits() Traits { return Traits{VolatileCache: false, DiscardZeroes: false} }

func (b *rbdBackend) Close() error {
	var err error
	if b.image != nil {
		if r := C.rbd_close(b.image); r < 0 {
			err = rbdError("close", b.name, r)
		}
		b.image = nil
	}
	releaseIOCtx(&b.ioctx, &b.conn)
	return err
}

func (b *rbdBackend) readOnlyError(op string) error {
	return &os.PathError{Op: op, Path: "rbd:" + b.name, Err: ErrReadOnly}
}
