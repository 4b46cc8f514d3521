//go:build !norbd && cgo

// Ceph's client libraries are loaded when the first cluster connection is
// made (nt_ceph_load), not when the daemon starts: a daemon that serves
// no RBD image and belongs to no gateway group neither needs them
// installed nor pays their start-up, about 40 dynamic libraries. Each
// function the backend calls is defined here under its own name and
// forwards to the library's; its prototype is the header's, which the
// compiler checks it against.

#include <dlfcn.h>
#include <stdio.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

static int (*p_rados_blocklist_add)(rados_t cluster, char *client_address, uint32_t expire_seconds);
int rados_blocklist_add(rados_t cluster, char *client_address, uint32_t expire_seconds) { return p_rados_blocklist_add(cluster, client_address, expire_seconds); }

static void (*p_rados_buffer_free)(char *buf);
void rados_buffer_free(char *buf) { p_rados_buffer_free(buf); }

static int (*p_rados_conf_get)(rados_t cluster, const char *option, char *buf, size_t len);
int rados_conf_get(rados_t cluster, const char *option, char *buf, size_t len) { return p_rados_conf_get(cluster, option, buf, len); }

static int (*p_rados_conf_read_file)(rados_t cluster, const char *path);
int rados_conf_read_file(rados_t cluster, const char *path) { return p_rados_conf_read_file(cluster, path); }

static int (*p_rados_conf_set)(rados_t cluster, const char *option, const char *value);
int rados_conf_set(rados_t cluster, const char *option, const char *value) { return p_rados_conf_set(cluster, option, value); }

static int (*p_rados_connect)(rados_t cluster);
int rados_connect(rados_t cluster) { return p_rados_connect(cluster); }

static int (*p_rados_create2)(rados_t *pcluster, const char *const clustername, const char *const name, uint64_t flags);
int rados_create2(rados_t *pcluster, const char *const clustername, const char *const name, uint64_t flags) { return p_rados_create2(pcluster, clustername, name, flags); }

static rados_read_op_t (*p_rados_create_read_op)(void);
rados_read_op_t rados_create_read_op(void) { return p_rados_create_read_op(); }

static rados_write_op_t (*p_rados_create_write_op)(void);
rados_write_op_t rados_create_write_op(void) { return p_rados_create_write_op(); }

static int (*p_rados_getxattr)(rados_ioctx_t io, const char *o, const char *name, char *buf, size_t len);
int rados_getxattr(rados_ioctx_t io, const char *o, const char *name, char *buf, size_t len) { return p_rados_getxattr(io, o, name, buf, len); }

static int (*p_rados_ioctx_create)(rados_t cluster, const char *pool_name, rados_ioctx_t *ioctx);
int rados_ioctx_create(rados_t cluster, const char *pool_name, rados_ioctx_t *ioctx) { return p_rados_ioctx_create(cluster, pool_name, ioctx); }

static void (*p_rados_ioctx_destroy)(rados_ioctx_t io);
void rados_ioctx_destroy(rados_ioctx_t io) { p_rados_ioctx_destroy(io); }

static void (*p_rados_ioctx_set_namespace)(rados_ioctx_t io, const char *nspace);
void rados_ioctx_set_namespace(rados_ioctx_t io, const char *nspace) { p_rados_ioctx_set_namespace(io, nspace); }

static ssize_t (*p_rados_list_lockers)(rados_ioctx_t io, const char *o, const char *name, int *exclusive, char *tag, size_t *tag_len, char *clients, size_t *clients_len, char *cookies, size_t *cookies_len, char *addrs, size_t *addrs_len);
ssize_t rados_list_lockers(rados_ioctx_t io, const char *o, const char *name, int *exclusive, char *tag, size_t *tag_len, char *clients, size_t *clients_len, char *cookies, size_t *cookies_len, char *addrs, size_t *addrs_len) { return p_rados_list_lockers(io, o, name, exclusive, tag, tag_len, clients, clients_len, cookies, cookies_len, addrs, addrs_len); }

static int (*p_rados_lock_exclusive)(rados_ioctx_t io, const char *oid, const char *name, const char *cookie, const char *desc, struct timeval *duration, uint8_t flags);
int rados_lock_exclusive(rados_ioctx_t io, const char *oid, const char *name, const char *cookie, const char *desc, struct timeval *duration, uint8_t flags) { return p_rados_lock_exclusive(io, oid, name, cookie, desc, duration, flags); }

static int (*p_rados_lock_shared)(rados_ioctx_t io, const char *o, const char *name, const char *cookie, const char *tag, const char *desc, struct timeval *duration, uint8_t flags);
int rados_lock_shared(rados_ioctx_t io, const char *o, const char *name, const char *cookie, const char *tag, const char *desc, struct timeval *duration, uint8_t flags) { return p_rados_lock_shared(io, o, name, cookie, tag, desc, duration, flags); }

static int (*p_rados_notify2)(rados_ioctx_t io, const char *o, const char *buf, int buf_len, uint64_t timeout_ms, char **reply_buffer, size_t *reply_buffer_len);
int rados_notify2(rados_ioctx_t io, const char *o, const char *buf, int buf_len, uint64_t timeout_ms, char **reply_buffer, size_t *reply_buffer_len) { return p_rados_notify2(io, o, buf, buf_len, timeout_ms, reply_buffer, reply_buffer_len); }

static int (*p_rados_notify_ack)(rados_ioctx_t io, const char *o, uint64_t notify_id, uint64_t cookie, const char *buf, int buf_len);
int rados_notify_ack(rados_ioctx_t io, const char *o, uint64_t notify_id, uint64_t cookie, const char *buf, int buf_len) { return p_rados_notify_ack(io, o, notify_id, cookie, buf, buf_len); }

static void (*p_rados_omap_get_end)(rados_omap_iter_t iter);
void rados_omap_get_end(rados_omap_iter_t iter) { p_rados_omap_get_end(iter); }

static int (*p_rados_omap_get_next)(rados_omap_iter_t iter, char **key, char **val, size_t *len);
int rados_omap_get_next(rados_omap_iter_t iter, char **key, char **val, size_t *len) { return p_rados_omap_get_next(iter, key, val, len); }

static int (*p_rados_read)(rados_ioctx_t io, const char *oid, char *buf, size_t len, uint64_t off);
int rados_read(rados_ioctx_t io, const char *oid, char *buf, size_t len, uint64_t off) { return p_rados_read(io, oid, buf, len, off); }

static void (*p_rados_read_op_omap_get_vals_by_keys)(rados_read_op_t read_op, char const *const *keys, size_t keys_len, rados_omap_iter_t *iter, int *prval);
void rados_read_op_omap_get_vals_by_keys(rados_read_op_t read_op, char const *const *keys, size_t keys_len, rados_omap_iter_t *iter, int *prval) { p_rados_read_op_omap_get_vals_by_keys(read_op, keys, keys_len, iter, prval); }

static int (*p_rados_read_op_operate)(rados_read_op_t read_op, rados_ioctx_t io, const char *oid, int flags);
int rados_read_op_operate(rados_read_op_t read_op, rados_ioctx_t io, const char *oid, int flags) { return p_rados_read_op_operate(read_op, io, oid, flags); }

static void (*p_rados_release_read_op)(rados_read_op_t read_op);
void rados_release_read_op(rados_read_op_t read_op) { p_rados_release_read_op(read_op); }

static void (*p_rados_release_write_op)(rados_write_op_t write_op);
void rados_release_write_op(rados_write_op_t write_op) { p_rados_release_write_op(write_op); }

static void (*p_rados_shutdown)(rados_t cluster);
void rados_shutdown(rados_t cluster) { p_rados_shutdown(cluster); }

static int (*p_rados_unlock)(rados_ioctx_t io, const char *o, const char *name, const char *cookie);
int rados_unlock(rados_ioctx_t io, const char *o, const char *name, const char *cookie) { return p_rados_unlock(io, o, name, cookie); }

static int (*p_rados_unwatch2)(rados_ioctx_t io, uint64_t cookie);
int rados_unwatch2(rados_ioctx_t io, uint64_t cookie) { return p_rados_unwatch2(io, cookie); }

static int (*p_rados_wait_for_latest_osdmap)(rados_t cluster);
int rados_wait_for_latest_osdmap(rados_t cluster) { return p_rados_wait_for_latest_osdmap(cluster); }

static int (*p_rados_watch2)(rados_ioctx_t io, const char *o, uint64_t *cookie, rados_watchcb2_t watchcb, rados_watcherrcb_t watcherrcb, void *arg);
int rados_watch2(rados_ioctx_t io, const char *o, uint64_t *cookie, rados_watchcb2_t watchcb, rados_watcherrcb_t watcherrcb, void *arg) { return p_rados_watch2(io, o, cookie, watchcb, watcherrcb, arg); }

static int (*p_rados_watch_check)(rados_ioctx_t io, uint64_t cookie);
int rados_watch_check(rados_ioctx_t io, uint64_t cookie) { return p_rados_watch_check(io, cookie); }

static int (*p_rados_watch_flush)(rados_t cluster);
int rados_watch_flush(rados_t cluster) { return p_rados_watch_flush(cluster); }

static void (*p_rados_write_op_assert_exists)(rados_write_op_t write_op);
void rados_write_op_assert_exists(rados_write_op_t write_op) { p_rados_write_op_assert_exists(write_op); }

static void (*p_rados_write_op_cmpxattr)(rados_write_op_t write_op, const char *name, uint8_t comparison_operator, const char *value, size_t value_len);
void rados_write_op_cmpxattr(rados_write_op_t write_op, const char *name, uint8_t comparison_operator, const char *value, size_t value_len) { p_rados_write_op_cmpxattr(write_op, name, comparison_operator, value, value_len); }

static void (*p_rados_write_op_create)(rados_write_op_t write_op, int exclusive, const char *category);
void rados_write_op_create(rados_write_op_t write_op, int exclusive, const char *category) { p_rados_write_op_create(write_op, exclusive, category); }

static void (*p_rados_write_op_exec)(rados_write_op_t write_op, const char *cls, const char *method, const char *in_buf, size_t in_len, int *prval);
void rados_write_op_exec(rados_write_op_t write_op, const char *cls, const char *method, const char *in_buf, size_t in_len, int *prval) { p_rados_write_op_exec(write_op, cls, method, in_buf, in_len, prval); }

static void (*p_rados_write_op_omap_cmp)(rados_write_op_t write_op, const char *key, uint8_t comparison_operator, const char *val, size_t val_len, int *prval);
void rados_write_op_omap_cmp(rados_write_op_t write_op, const char *key, uint8_t comparison_operator, const char *val, size_t val_len, int *prval) { p_rados_write_op_omap_cmp(write_op, key, comparison_operator, val, val_len, prval); }

static void (*p_rados_write_op_omap_set)(rados_write_op_t write_op, char const *const *keys, char const *const *vals, const size_t *lens, size_t num);
void rados_write_op_omap_set(rados_write_op_t write_op, char const *const *keys, char const *const *vals, const size_t *lens, size_t num) { p_rados_write_op_omap_set(write_op, keys, vals, lens, num); }

static int (*p_rados_write_op_operate)(rados_write_op_t write_op, rados_ioctx_t io, const char *oid, time_t *mtime, int flags);
int rados_write_op_operate(rados_write_op_t write_op, rados_ioctx_t io, const char *oid, time_t *mtime, int flags) { return p_rados_write_op_operate(write_op, io, oid, mtime, flags); }

static void (*p_rados_write_op_setxattr)(rados_write_op_t write_op, const char *name, const char *value, size_t value_len);
void rados_write_op_setxattr(rados_write_op_t write_op, const char *name, const char *value, size_t value_len) { p_rados_write_op_setxattr(write_op, name, value, value_len); }

static void (*p_rados_write_op_write_full)(rados_write_op_t write_op, const char *buffer, size_t len);
void rados_write_op_write_full(rados_write_op_t write_op, const char *buffer, size_t len) { p_rados_write_op_write_full(write_op, buffer, len); }

static int (*p_rbd_aio_create_completion)(void *cb_arg, rbd_callback_t complete_cb, rbd_completion_t *c);
int rbd_aio_create_completion(void *cb_arg, rbd_callback_t complete_cb, rbd_completion_t *c) { return p_rbd_aio_create_completion(cb_arg, complete_cb, c); }

static int (*p_rbd_aio_flush)(rbd_image_t image, rbd_completion_t c);
int rbd_aio_flush(rbd_image_t image, rbd_completion_t c) { return p_rbd_aio_flush(image, c); }

static ssize_t (*p_rbd_aio_get_return_value)(rbd_completion_t c);
ssize_t rbd_aio_get_return_value(rbd_completion_t c) { return p_rbd_aio_get_return_value(c); }

static int (*p_rbd_aio_read)(rbd_image_t image, uint64_t off, size_t len, char *buf, rbd_completion_t c);
int rbd_aio_read(rbd_image_t image, uint64_t off, size_t len, char *buf, rbd_completion_t c) { return p_rbd_aio_read(image, off, len, buf, c); }

static void (*p_rbd_aio_release)(rbd_completion_t c);
void rbd_aio_release(rbd_completion_t c) { p_rbd_aio_release(c); }

static int (*p_rbd_aio_write)(rbd_image_t image, uint64_t off, size_t len, const char *buf, rbd_completion_t c);
int rbd_aio_write(rbd_image_t image, uint64_t off, size_t len, const char *buf, rbd_completion_t c) { return p_rbd_aio_write(image, off, len, buf, c); }

static int (*p_rbd_close)(rbd_image_t image);
int rbd_close(rbd_image_t image) { return p_rbd_close(image); }

static int (*p_rbd_create4)(rados_ioctx_t io, const char *name, uint64_t size, rbd_image_options_t opts);
int rbd_create4(rados_ioctx_t io, const char *name, uint64_t size, rbd_image_options_t opts) { return p_rbd_create4(io, name, size, opts); }

static int (*p_rbd_discard)(rbd_image_t image, uint64_t ofs, uint64_t len);
int rbd_discard(rbd_image_t image, uint64_t ofs, uint64_t len) { return p_rbd_discard(image, ofs, len); }

static int (*p_rbd_flush)(rbd_image_t image);
int rbd_flush(rbd_image_t image) { return p_rbd_flush(image); }

static int (*p_rbd_get_features)(rbd_image_t image, uint64_t *features);
int rbd_get_features(rbd_image_t image, uint64_t *features) { return p_rbd_get_features(image, features); }

static int (*p_rbd_get_id)(rbd_image_t image, char *id, size_t id_len);
int rbd_get_id(rbd_image_t image, char *id, size_t id_len) { return p_rbd_get_id(image, id, id_len); }

static int (*p_rbd_get_size)(rbd_image_t image, uint64_t *size);
int rbd_get_size(rbd_image_t image, uint64_t *size) { return p_rbd_get_size(image, size); }

static void (*p_rbd_image_options_create)(rbd_image_options_t *opts);
void rbd_image_options_create(rbd_image_options_t *opts) { p_rbd_image_options_create(opts); }

static void (*p_rbd_image_options_destroy)(rbd_image_options_t opts);
void rbd_image_options_destroy(rbd_image_options_t opts) { p_rbd_image_options_destroy(opts); }

static int (*p_rbd_open)(rados_ioctx_t io, const char *name, rbd_image_t *image, const char *snap_name);
int rbd_open(rados_ioctx_t io, const char *name, rbd_image_t *image, const char *snap_name) { return p_rbd_open(io, name, image, snap_name); }

static int (*p_rbd_open_read_only)(rados_ioctx_t io, const char *name, rbd_image_t *image, const char *snap_name);
int rbd_open_read_only(rados_ioctx_t io, const char *name, rbd_image_t *image, const char *snap_name) { return p_rbd_open_read_only(io, name, image, snap_name); }

static ssize_t (*p_rbd_read)(rbd_image_t image, uint64_t ofs, size_t len, char *buf);
ssize_t rbd_read(rbd_image_t image, uint64_t ofs, size_t len, char *buf) { return p_rbd_read(image, ofs, len, buf); }

static ssize_t (*p_rbd_write)(rbd_image_t image, uint64_t ofs, size_t len, const char *buf);
ssize_t rbd_write(rbd_image_t image, uint64_t ofs, size_t len, const char *buf) { return p_rbd_write(image, ofs, len, buf); }

static ssize_t (*p_rbd_write_zeroes)(rbd_image_t image, uint64_t ofs, size_t len, int zero_flags, int op_flags);
ssize_t rbd_write_zeroes(rbd_image_t image, uint64_t ofs, size_t len, int zero_flags, int op_flags) { return p_rbd_write_zeroes(image, ofs, len, zero_flags, op_flags); }

struct nt_ceph_sym {
	int rbd; // in librbd, else librados
	const char *name;
	void **fn;
};

static const struct nt_ceph_sym nt_ceph_syms[] = {
	{0, "rados_blocklist_add", (void **)&p_rados_blocklist_add},
	{0, "rados_buffer_free", (void **)&p_rados_buffer_free},
	{0, "rados_conf_get", (void **)&p_rados_conf_get},
	{0, "rados_conf_read_file", (void **)&p_rados_conf_read_file},
	{0, "rados_conf_set", (void **)&p_rados_conf_set},
	{0, "rados_connect", (void **)&p_rados_connect},
	{0, "rados_create2", (void **)&p_rados_create2},
	{0, "rados_create_read_op", (void **)&p_rados_create_read_op},
	{0, "rados_create_write_op", (void **)&p_rados_create_write_op},
	{0, "rados_getxattr", (void **)&p_rados_getxattr},
	{0, "rados_ioctx_create", (void **)&p_rados_ioctx_create},
	{0, "rados_ioctx_destroy", (void **)&p_rados_ioctx_destroy},
	{0, "rados_ioctx_set_namespace", (void **)&p_rados_ioctx_set_namespace},
	{0, "rados_list_lockers", (void **)&p_rados_list_lockers},
	{0, "rados_lock_exclusive", (void **)&p_rados_lock_exclusive},
	{0, "rados_lock_shared", (void **)&p_rados_lock_shared},
	{0, "rados_notify2", (void **)&p_rados_notify2},
	{0, "rados_notify_ack", (void **)&p_rados_notify_ack},
	{0, "rados_omap_get_end", (void **)&p_rados_omap_get_end},
	{0, "rados_omap_get_next", (void **)&p_rados_omap_get_next},
	{0, "rados_read", (void **)&p_rados_read},
	{0, "rados_read_op_omap_get_vals_by_keys", (void **)&p_rados_read_op_omap_get_vals_by_keys},
	{0, "rados_read_op_operate", (void **)&p_rados_read_op_operate},
	{0, "rados_release_read_op", (void **)&p_rados_release_read_op},
	{0, "rados_release_write_op", (void **)&p_rados_release_write_op},
	{0, "rados_shutdown", (void **)&p_rados_shutdown},
	{0, "rados_unlock", (void **)&p_rados_unlock},
	{0, "rados_unwatch2", (void **)&p_rados_unwatch2},
	{0, "rados_wait_for_latest_osdmap", (void **)&p_rados_wait_for_latest_osdmap},
	{0, "rados_watch2", (void **)&p_rados_watch2},
	{0, "rados_watch_check", (void **)&p_rados_watch_check},
	{0, "rados_watch_flush", (void **)&p_rados_watch_flush},
	{0, "rados_write_op_assert_exists", (void **)&p_rados_write_op_assert_exists},
	{0, "rados_write_op_cmpxattr", (void **)&p_rados_write_op_cmpxattr},
	{0, "rados_write_op_create", (void **)&p_rados_write_op_create},
	{0, "rados_write_op_exec", (void **)&p_rados_write_op_exec},
	{0, "rados_write_op_omap_cmp", (void **)&p_rados_write_op_omap_cmp},
	{0, "rados_write_op_omap_set", (void **)&p_rados_write_op_omap_set},
	{0, "rados_write_op_operate", (void **)&p_rados_write_op_operate},
	{0, "rados_write_op_setxattr", (void **)&p_rados_write_op_setxattr},
	{0, "rados_write_op_write_full", (void **)&p_rados_write_op_write_full},
	{1, "rbd_aio_create_completion", (void **)&p_rbd_aio_create_completion},
	{1, "rbd_aio_flush", (void **)&p_rbd_aio_flush},
	{1, "rbd_aio_get_return_value", (void **)&p_rbd_aio_get_return_value},
	{1, "rbd_aio_read", (void **)&p_rbd_aio_read},
	{1, "rbd_aio_release", (void **)&p_rbd_aio_release},
	{1, "rbd_aio_write", (void **)&p_rbd_aio_write},
	{1, "rbd_close", (void **)&p_rbd_close},
	{1, "rbd_create4", (void **)&p_rbd_create4},
	{1, "rbd_discard", (void **)&p_rbd_discard},
	{1, "rbd_flush", (void **)&p_rbd_flush},
	{1, "rbd_get_features", (void **)&p_rbd_get_features},
	{1, "rbd_get_id", (void **)&p_rbd_get_id},
	{1, "rbd_get_size", (void **)&p_rbd_get_size},
	{1, "rbd_image_options_create", (void **)&p_rbd_image_options_create},
	{1, "rbd_image_options_destroy", (void **)&p_rbd_image_options_destroy},
	{1, "rbd_open", (void **)&p_rbd_open},
	{1, "rbd_open_read_only", (void **)&p_rbd_open_read_only},
	{1, "rbd_read", (void **)&p_rbd_read},
	{1, "rbd_write", (void **)&p_rbd_write},
	{1, "rbd_write_zeroes", (void **)&p_rbd_write_zeroes},
};

// nt_ceph_load opens librados and librbd (their file names) and finds
// every function above. It returns 0, or -1 with the reason in err.
// Called once, before any of them.
int nt_ceph_load(const char *rados, const char *rbd, char *err, size_t errlen) {
	void *lib[2];
	const char *names[2] = {rados, rbd};
	for (int i = 0; i < 2; i++) {
		lib[i] = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (lib[i] == NULL) {
			snprintf(err, errlen, "%s", dlerror());
			return -1;
		}
	}
	for (size_t i = 0; i < sizeof(nt_ceph_syms) / sizeof(nt_ceph_syms[0]); i++) {
		const struct nt_ceph_sym *s = &nt_ceph_syms[i];
		*s->fn = dlsym(lib[s->rbd], s->name);
		if (*s->fn == NULL) {
			snprintf(err, errlen, "%s has no %s", names[s->rbd], s->name);
			return -1;
		}
	}
	return 0;
}
