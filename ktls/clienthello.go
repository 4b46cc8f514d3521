package ktls

import "encoding/binary"

// helloOffer is what a ClientHello offers of what the controller
// requires. GnuTLS fails a ClientHello without either with an error that
// does not say which it missed (a TLS 1.2 one goes on to TLS 1.2 cipher
// suites and fails for want of a certificate); the ClientHello does.
type helloOffer struct {
	tls13 bool // supported_versions lists TLS 1.3
	psk   bool // it has a pre_shared_key extension
}

// TLS extension types (RFC 8446 §4.2).
const (
	extPreSharedKey      = 41
	extSupportedVersions = 43
)

// helloReader takes a ClientHello apart; it stops, not ok, at the first
// field that runs past the end.
type helloReader struct {
	b  []byte
	ok bool
}

func (r *helloReader) take(n int) []byte {
	if !r.ok || n > len(r.b) {
		r.ok = false
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// vector takes a field with a length of lenBytes (1 or 2) in front.
func (r *helloReader) vector(lenBytes int) []byte {
	l := r.take(lenBytes)
	if !r.ok {
		return nil
	}
	n := int(l[0])
	if lenBytes == 2 {
		n = int(binary.BigEndian.Uint16(l))
	}
	return r.take(n)
}

// parseClientHello reads a ClientHello handshake message's body (RFC 8446
// §4.1.2), the handshake header taken off, as GnuTLS hands it to a hook.
func parseClientHello(b []byte) (offer helloOffer, ok bool) {
	r := &helloReader{b: b, ok: true}
	r.take(2 + 32) // legacy_version, random
	r.vector(1)    // legacy_session_id
	r.vector(2)    // cipher_suites
	r.vector(1)    // legacy_compression_methods
	if r.ok && len(r.b) == 0 {
		return offer, true // no extensions: TLS 1.2 or older, no PSK
	}
	exts := &helloReader{b: r.vector(2), ok: r.ok}
	for exts.ok && len(exts.b) > 0 {
		typ := exts.take(2)
		data := exts.vector(2)
		if !exts.ok {
			break
		}
		switch binary.BigEndian.Uint16(typ) {
		case extPreSharedKey:
			offer.psk = true
		case extSupportedVersions:
			offer.tls13 = offersTLS13(data)
		}
	}
	return offer, exts.ok
}

// offersTLS13 reads a ClientHello's supported_versions.
func offersTLS13(data []byte) bool {
	r := &helloReader{b: data, ok: true}
	versions := r.vector(1)
	for i := 0; i+1 < len(versions); i += 2 {
		if binary.BigEndian.Uint16(versions[i:]) == tls13Version {
			return true
		}
	}
	return false
}
