//go:build cgo && !notls

package ktls

/*
#cgo pkg-config: gnutls
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <gnutls/gnutls.h>

// ktlsServerPSK is Go's (gnutls_callback.go): it looks the identity up
// and writes the PSK into psk, or refuses it.
extern int ktlsServerPSK(uintptr_t state, unsigned char *identity, unsigned int size,
	unsigned char *psk, unsigned int *psklen);

// ktlsClientHello is Go's too: it reads what the ClientHello offers.
extern void ktlsClientHello(uintptr_t state, unsigned char *msg, unsigned int size);

// GnuTLS takes a binder hash per PSK from 3.8.11 on; before, every
// external PSK's binder is SHA-256, and a SHA-384 PSK cannot be used.
#if GNUTLS_VERSION_NUMBER >= 0x03080b
#define KTLS_SHA384_PSK 1
#else
#define KTLS_SHA384_PSK 0
#endif

// psk_callback goes between GnuTLS and Go: the PSK has to be in
// gnutls_malloc'd memory, which Go cannot allocate.
static int psk_callback(gnutls_session_t s, const gnutls_datum_t *identity, gnutls_datum_t *key) {
	unsigned char psk[64];
	unsigned int n = 0;
	int r = ktlsServerPSK((uintptr_t)gnutls_session_get_ptr(s), identity->data, identity->size, psk, &n);
	if (r == 0 && (n == 0 || n > sizeof(psk)))
		r = -1;
	if (r == 0) {
		key->data = gnutls_malloc(n);
		if (key->data == NULL)
			r = -1;
		else {
			memcpy(key->data, psk, n);
			key->size = n;
		}
	}
	gnutls_memset(psk, 0, sizeof(psk));
	return r;
}

static int hello_hook(gnutls_session_t s, unsigned int htype, unsigned int when,
		unsigned int incoming, const gnutls_datum_t *msg) {
	if (htype == GNUTLS_HANDSHAKE_CLIENT_HELLO && incoming)
		ktlsClientHello((uintptr_t)gnutls_session_get_ptr(s), msg->data, msg->size);
	return 0;
}

// push is send(2) as GnuTLS's own would be, set so that a GnuTLS whose
// system configuration turns ktls on leaves the socket alone: it does not
// set up kernel TLS with a push function of the caller's.
static ssize_t push(gnutls_transport_ptr_t fd, const void *data, size_t size) {
	return send((int)(intptr_t)fd, data, size, MSG_NOSIGNAL);
}

// session_new makes a server session on fd that takes PSKs from
// psk_callback and sends no session ticket: the kernel must start from
// the record sequence numbers the handshake left.
static int session_new(gnutls_session_t *s, gnutls_psk_server_credentials_t *cred,
		gnutls_priority_t prio, int fd, uintptr_t state) {
	int r;
#if KTLS_SHA384_PSK
	r = gnutls_psk_allocate_server_credentials2(cred, GNUTLS_MAC_UNKNOWN);
#else
	r = gnutls_psk_allocate_server_credentials(cred);
#endif
	if (r < 0)
		return r;
	gnutls_psk_set_server_credentials_function2(*cred, psk_callback);
	r = gnutls_init(s, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL | GNUTLS_NO_TICKETS);
	if (r < 0) {
		gnutls_psk_free_server_credentials(*cred);
		return r;
	}
	r = gnutls_credentials_set(*s, GNUTLS_CRD_PSK, *cred);
	if (r == 0)
		r = gnutls_priority_set(*s, prio);
	if (r < 0) {
		gnutls_deinit(*s);
		gnutls_psk_free_server_credentials(*cred);
		return r;
	}
	gnutls_session_set_ptr(*s, (void *)state);
	gnutls_handshake_set_hook_function(*s, GNUTLS_HANDSHAKE_CLIENT_HELLO, GNUTLS_HOOK_PRE, hello_hook);
	gnutls_transport_set_int(*s, fd);
	gnutls_transport_set_push_function(*s, push);
	gnutls_handshake_set_timeout(*s, 0);
	return 0;
}
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Available reports whether this build has GnuTLS, and so Server.
func Available() bool { return true }

// sha384PSK is whether the GnuTLS this is built with can bind a PSK to
// SHA-384.
const sha384PSK = C.KTLS_SHA384_PSK != 0

// priorityString follows tlshd's for a PSK handshake (ktls-utils,
// src/tlshd/ktls.c), appended to the system's default priorities as
// tlshd does: TLS 1.3 alone, no session tickets, the ciphers the kernel
// runs, PSK with or without (EC)DHE. Unlike tlshd it takes its own order
// over the host's: (EC)DHE whenever the host offers it, for forward
// secrecy (a Linux host lists psk_ke first), and AES-128-GCM before
// ChaCha20-Poly1305.
const priorityString = "-COMP-ALL:-VERS-ALL:+VERS-TLS1.3:%NO_TICKETS:%SERVER_PRECEDENCE" +
	":-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305" +
	":+ECDHE-PSK:+DHE-PSK:+PSK"

var priorities = sync.OnceValues(func() (C.gnutls_priority_t, error) {
	if rc := C.gnutls_global_init(); rc < 0 {
		return nil, gnutlsError(ErrHandshake, "GnuTLS does not start", rc)
	}
	var p C.gnutls_priority_t
	s := C.CString(priorityString)
	defer C.free(unsafe.Pointer(s))
	var errpos *C.char
	if rc := C.gnutls_priority_init2(&p, s, &errpos, C.GNUTLS_PRIORITY_INIT_DEF_APPEND); rc < 0 {
		return nil, gnutlsError(ErrHandshake, fmt.Sprintf("priority string %q", priorityString), rc)
	}
	return p, nil
})

// handshakeState is one handshake's, for the PSK callback, which finds it
// through a cgo.Handle in the session.
type handshakeState struct {
	fd       int
	lookup   func(identity string) ([]byte, error)
	hello    helloOffer // of the last ClientHello, if sawHello
	sawHello bool
	called   bool   // GnuTLS asked for a PSK
	identity string // the one offered
	pskSize  int    // of the PSK lookup gave; 0 for none
	refused  error  // why the callback refused the identity
}

// handshake runs the handshake and takes the keys it left.
func handshake(fd int, lookup func(string) ([]byte, error), deadline time.Time) (*Session, *keyMaterial, error) {
	prio, err := priorities()
	if err != nil {
		return nil, nil, err
	}
	st := &handshakeState{fd: fd, lookup: lookup}
	h := cgo.NewHandle(st)
	defer h.Delete()
	var s C.gnutls_session_t
	var cred C.gnutls_psk_server_credentials_t
	if rc := C.session_new(&s, &cred, prio, C.int(fd), C.uintptr_t(h)); rc < 0 {
		return nil, nil, gnutlsError(ErrHandshake, "a GnuTLS session", rc)
	}
	defer C.gnutls_psk_free_server_credentials(cred)
	defer C.gnutls_deinit(s) // sends nothing: the socket is the kernel's next
	if err := runHandshake(s, fd, st, deadline); err != nil {
		return nil, nil, err
	}
	return takeKeys(s, st)
}

// runHandshake drives the non-blocking handshake to its end or deadline.
func runHandshake(s C.gnutls_session_t, fd int, st *handshakeState, deadline time.Time) error {
	for {
		rc := C.gnutls_handshake(s)
		switch {
		case rc == 0:
			return nil
		case rc == C.GNUTLS_E_AGAIN || rc == C.GNUTLS_E_INTERRUPTED:
			events := int16(unix.POLLIN)
			if C.gnutls_record_get_direction(s) == 1 {
				events = unix.POLLOUT
			}
			if err := waitFD(fd, events, deadline); err != nil {
				return fmt.Errorf("%w, in the handshake", err)
			}
		case C.gnutls_error_is_fatal(rc) == 0:
			// A warning alert; GnuTLS carries on, within the deadline.
			if !deadline.IsZero() && time.Now().After(deadline) {
				return fmt.Errorf("%w, in the handshake", ErrTimeout)
			}
		default:
			err := handshakeError(s, st, rc)
			sendAlert(s, err, rc)
			return err
		}
	}
}
