//go:build !norbd && cgo

package backend

/*
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

// meta_cas sets the omap key of the image's header object to val in one
// write op that first compares the key's value with old (an absent key
// compares as empty): the OSD applies both or neither, and answers
// ECANCELED when the value is no longer old.
static int meta_cas(rados_ioctx_t io, const char *oid, const char *key,
		    const char *old, size_t old_len, const char *val, size_t val_len) {
	rados_write_op_t op = rados_create_write_op();
	int prval = 0;
	const char *keys[1] = { key };
	const char *vals[1] = { val };
	size_t lens[1] = { val_len };
	rados_write_op_assert_exists(op);
	rados_write_op_omap_cmp(op, key, LIBRADOS_CMPXATTR_OP_EQ, old, old_len, &prval);
	rados_write_op_omap_set(op, keys, vals, lens, 1);
	int r = rados_write_op_operate(op, io, oid, NULL, 0);
	rados_release_write_op(op);
	return r;
}

// meta_get reads the omap key of the header object into a buffer of
// malloc's (*val, *len); ENOENT when it is not set.
static int meta_get(rados_ioctx_t io, const char *oid, const char *key, char **val, size_t *len) {
	rados_read_op_t op = rados_create_read_op();
	rados_omap_iter_t it = NULL;
	int prval = 0;
	const char *keys[1] = { key };
	rados_read_op_omap_get_vals_by_keys(op, keys, 1, &it, &prval);
	int r = rados_read_op_operate(op, io, oid, 0);
	if (r >= 0)
		r = prval;
	if (r >= 0) {
		char *k = NULL, *v = NULL;
		size_t l = 0;
		r = rados_omap_get_next(it, &k, &v, &l);
		if (r == 0 && k == NULL) {
			r = -ENOENT;
		} else if (r == 0) {
			*val = malloc(l ? l : 1);
			if (*val == NULL)
				r = -ENOMEM;
			else
				memcpy(*val, v, l);
			*len = l;
		}
	}
	if (it)
		rados_omap_get_end(it);
	rados_release_read_op(op);
	return r;
}
*/
import "C"

import "unsafe"

// The image's metadata (rbd image-meta) is the omap of its header object,
// rbd_header.<image id>, each key prefixed with "metadata_". librbd sets a
// key without a condition; CompareAndSetMetadata writes the omap itself,
// in one op with the compare.
const rbdMetaPrefix = "metadata_"

// headerObject is the name of the image's header object; b.mu held.
func (b *rbdBackend) headerObject() (string, error) {
	id, err := b.imageID()
	return "rbd_header." + id, err
}

// ImageID is the image's ID (rbd info's id).
func (b *rbdBackend) ImageID() (string, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.imageID()
}

// imageID is ImageID with b.mu held.
func (b *rbdBackend) imageID() (string, error) {
	var buf [128]C.char
	if r := C.rbd_get_id(b.image, &buf[0], C.size_t(len(buf))); r < 0 {
		return "", rbdError("get image id", b.name, r)
	}
	return C.GoString(&buf[0]), nil
}

// Metadata returns the value of the image's metadata key, nil if it is
// not set. It reads the header object's omap, as the compare does: the
// bytes exactly.
func (b *rbdBackend) Metadata(key string) ([]byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	oid, err := b.headerObject()
	if err != nil {
		return nil, err
	}
	coid, ckey := C.CString(oid), C.CString(rbdMetaPrefix+key)
	defer C.free(unsafe.Pointer(coid))
	defer C.free(unsafe.Pointer(ckey))
	var val *C.char
	var n C.size_t
	r := C.meta_get(b.ioctx, coid, ckey, &val, &n)
	switch {
	case r == -C.ENOENT:
		return nil, nil
	case r < 0:
		return nil, rbdError("get image metadata "+key, b.name, r)
	}
	defer C.free(unsafe.Pointer(val))
	return C.GoBytes(unsafe.Pointer(val), C.int(n)), nil
}

// CompareAndSetMetadata sets the image's metadata key to value if its
// value is still old (nil: not set), on the OSDs when it returns; an
// error wrapping ECANCELED if it is not. It writes on a read-only image
// too: the metadata is not the image's data.
func (b *rbdBackend) CompareAndSetMetadata(key string, old, value []byte) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	oid, err := b.headerObject()
	if err != nil {
		return err
	}
	coid, ckey := C.CString(oid), C.CString(rbdMetaPrefix+key)
	defer C.free(unsafe.Pointer(coid))
	defer C.free(unsafe.Pointer(ckey))
	cold, cval := C.CBytes(append(old, 0)), C.CBytes(append(value, 0))
	defer C.free(cold)
	defer C.free(cval)
	r := C.meta_cas(b.ioctx, coid, ckey, (*C.char)(cold), C.size_t(len(old)), (*C.char)(cval), C.size_t(len(value)))
	if r < 0 {
		return rbdError("set image metadata "+key, b.name, r)
	}
	return nil
}
