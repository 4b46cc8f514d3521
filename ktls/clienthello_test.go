package ktls

import (
	"encoding/binary"
	"testing"
)

// clientHello builds a ClientHello body with the given extensions, each
// a type and its data; no extensions at all with exts nil.
func clientHello(exts ...[]byte) []byte {
	b := []byte{3, 3}
	b = append(b, make([]byte, 32)...) // random
	b = append(b, 0)                   // legacy_session_id
	b = append(b, 0, 2, 0x13, 0x01)    // cipher_suites: TLS_AES_128_GCM_SHA256
	b = append(b, 1, 0)                // legacy_compression_methods: null
	if exts == nil {
		return b
	}
	var all []byte
	for _, e := range exts {
		all = append(all, e...)
	}
	return append(binary.BigEndian.AppendUint16(b, uint16(len(all))), all...)
}

func extension(typ uint16, data ...byte) []byte {
	e := binary.BigEndian.AppendUint16(nil, typ)
	e = binary.BigEndian.AppendUint16(e, uint16(len(data)))
	return append(e, data...)
}

// cut takes n bytes off the end of b.
func cut(b []byte, n int) []byte { return b[:len(b)-n] }

// lengthened makes the last extension's length one more than the bytes
// that follow it, within a list whose length is right.
func lengthened(b []byte) []byte {
	b = append([]byte(nil), b...)
	binary.BigEndian.PutUint16(b[len(b)-2-2:], 3) // pskExt's data is 2 bytes
	return b
}

var (
	versions13and12 = extension(extSupportedVersions, 4, 3, 4, 3, 3)
	versions12      = extension(extSupportedVersions, 2, 3, 3)
	pskExt          = extension(extPreSharedKey, 0, 0)
	serverName      = extension(0, 0, 0)
)

func TestParseClientHello(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hello []byte
		want  helloOffer
		ok    bool
	}{
		{"TLS 1.3 with a PSK", clientHello(serverName, versions13and12, pskExt), helloOffer{tls13: true, psk: true}, true},
		{"TLS 1.3 for certificates", clientHello(versions13and12), helloOffer{tls13: true}, true},
		{"TLS 1.2 with a PSK extension", clientHello(versions12, pskExt), helloOffer{psk: true}, true},
		{"no supported_versions", clientHello(serverName), helloOffer{}, true},
		{"no extensions", clientHello(), helloOffer{}, true},
		{"cut in the random", clientHello()[:20], helloOffer{}, false},
		{"cut in an extension", cut(clientHello(versions13and12, pskExt), 1), helloOffer{}, false},
		{"an extension past the list", lengthened(clientHello(versions13and12, pskExt)), helloOffer{tls13: true}, false},
	} {
		got, ok := parseClientHello(tc.hello)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseClientHello reads whatever a host may send as a ClientHello
// without running past it.
func FuzzParseClientHello(f *testing.F) {
	f.Add(clientHello(serverName, versions13and12, pskExt))
	f.Add(clientHello(versions12))
	f.Add(clientHello())
	f.Add([]byte{3, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		offer, ok := parseClientHello(b)
		if again, ok2 := parseClientHello(b); again != offer || ok2 != ok {
			t.Fatal("two readings differ")
		}
	})
}
