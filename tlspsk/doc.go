// Package tlspsk owns the pre-shared keys of NVMe/TCP's secure channel,
// TLS 1.3 with a PSK, as the Linux host derives them: the configured PSK in
// the interchange format that `nvme gen-tls-key` prints, the retained PSK
// it is turned into for one host, the PSK identity a host offers in its
// ClientHello, and the TLS PSK that goes with that identity (NVMe/TCP
// Transport Specification §3.6.1, from TP 8011; the version 1 identities
// with their PSK digest and the generated PSKs of secure channel
// concatenation from TP 8018). The controller never sees the host's key
// ring: it must recompute, from the key configured for that host, the very
// bytes the host's libnvme or kernel computed, or the handshake fails with
// nothing but a bad binder to say why. So every value here is the one
// libnvme (src/nvme/linux.c) and Linux (drivers/nvme/common/auth.c) compute,
// byte for byte, and ServerPSK says in words why an identity is refused.
//
// Implementations do not agree on HKDF-Expand-Label. RFC 8446 prefixes the
// label and the context with their lengths; libnvme up to 1.15 did not, and
// wrote the output length little-endian, which libnvme 1.16 keeps as its
// "compat" derivation (nvme-cli --compat); libnvme 1.7 to 1.9 also took a
// version 1 identity whole as the TLS PSK's context; Linux 6.14 to 6.17
// derived the TLS PSK of secure concatenation without the length bytes
// too, but with a big-endian length. A Derivation names which one a host
// uses: the identity does not tell. One more is not here: libnvme up to
// 1.15 built on an OpenSSL 3 from before mid-2024 (3.0.8, for one), whose
// EVP_PKEY_CTX_add1_hkdf_info() replaced the info instead of appending to
// it, derived from the last piece it added alone.
//
// Nothing here logs, and nothing formats a key: a ConfiguredPSK prints as
// "[redacted]".
package tlspsk
