package config

import (
	"fmt"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/tlspsk"
)

// What an NVMe/TCP port asks of its hosts' secure channel (ports[].tls).
const (
	TLSNone     = "none"     // plaintext only: a TLS handshake is refused
	TLSAllowed  = "allowed"  // TLS 1.3 for hosts that start it, plaintext for the others
	TLSRequired = "required" // TLS 1.3 only: a plaintext ICReq is refused
)

// TLSModes lists the values of ports[].tls.
var TLSModes = []string{TLSNone, TLSAllowed, TLSRequired}

// TLSDerivations names tlspsk's derivations as tls_derivation takes them.
var TLSDerivations = map[string]tlspsk.Derivation{
	"rfc8446":     tlspsk.DerivationRFC8446,
	"compat":      tlspsk.DerivationCompat,
	"libnvme-1.7": tlspsk.DerivationLibnvme17,
}

// HasTLSKey reports whether the host has a configured PSK.
func (h Host) HasTLSKey() bool { return h.TLSKey != "" || h.TLSKeyFile != "" }

// TLSPSK reads and decodes the host's configured PSK (nil where none is
// set) and its derivation. Errors name the field.
func (h Host) TLSPSK() (*tlspsk.ConfiguredPSK, tlspsk.Derivation, error) {
	d, ok := TLSDerivations[h.TLSDerivation]
	if h.TLSDerivation == "" {
		d, ok = tlspsk.DerivationRFC8446, true
	}
	if !ok {
		return nil, 0, &fieldError{"tls_derivation", fmt.Errorf("%q is not one of rfc8446, compat, libnvme-1.7", h.TLSDerivation)}
	}
	k, err := keyField(h.TLSKey, h.TLSKeyFile, "tls_key", "key", parseTLSKey)
	if err != nil {
		return nil, 0, err
	}
	return k, d, nil
}

// parseTLSKey parses a configured PSK without the line end a key file
// written by `nvme gen-tls-key > file` or an editor carries.
func parseTLSKey(s string) (*tlspsk.ConfiguredPSK, error) {
	return tlspsk.ParseConfiguredPSK(strings.TrimRight(s, "\r\n"))
}
