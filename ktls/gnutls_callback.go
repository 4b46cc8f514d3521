//go:build cgo && !notls

package ktls

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// pskRoom is the size of psk_callback's buffer (gnutls.go).
const pskRoom = 64

// ktlsServerPSK is GnuTLS's PSK callback, through psk_callback: it asks
// lookup for the identity's PSK and copies it into psk, or records why
// it refuses the identity and returns -1. A panic in lookup refuses the
// identity too: it cannot unwind through GnuTLS.
//
//export ktlsServerPSK
func ktlsServerPSK(state C.uintptr_t, identity *C.uchar, size C.uint, psk *C.uchar, psklen *C.uint) (rc C.int) {
	st := cgo.Handle(state).Value().(*handshakeState)
	st.called = true
	st.identity = C.GoStringN((*C.char)(unsafe.Pointer(identity)), C.int(size))
	defer func() {
		if r := recover(); r != nil {
			st.refused = fmt.Errorf("%w: %q: the PSK lookup panicked: %v", ErrIdentityRefused, st.identity, r)
			rc = -1
		}
	}()
	key, err := st.lookup(st.identity)
	defer clear(key)
	if err != nil {
		st.refused = fmt.Errorf("%w: %q: %w", ErrIdentityRefused, st.identity, err)
		return -1
	}
	if err := usablePSK(len(key), sha384PSK); err != nil {
		st.refused = fmt.Errorf("%w: identity %q", err, st.identity)
		return -1
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(psk)), pskRoom), key)
	*psklen = C.uint(len(key))
	st.pskSize = len(key)
	return 0
}

// ktlsClientHello is GnuTLS's hook on the ClientHello, through
// hello_hook: it keeps what the ClientHello offers, to say why a
// handshake that never asked for a PSK failed.
//
//export ktlsClientHello
func ktlsClientHello(state C.uintptr_t, msg *C.uchar, size C.uint) {
	st := cgo.Handle(state).Value().(*handshakeState)
	st.hello, st.sawHello = parseClientHello(unsafe.Slice((*byte)(unsafe.Pointer(msg)), size))
}
