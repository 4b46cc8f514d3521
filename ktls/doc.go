// Package ktls is the controller's side of NVMe/TCP's secure channel
// (NVMe/TCP Transport Specification §3.6, from TP 8011): TLS 1.3 with an
// external pre-shared key and no certificates, handshaken on the
// connection's socket before the ICReq, after which the kernel encrypts
// and decrypts the records (kernel TLS), as the Linux host does with
// tlshd and nvme-tcp.
//
// Go's crypto/tls has no external PSK, so GnuTLS does the handshake,
// through a cgo layer that does no more than GnuTLS needs to be called
// (gnutls.go): the PSK callback hands the identity the host offered to
// the caller's lookup, which returns the TLS PSK (package tlspsk derives
// it) or refuses the identity with a reason. Once the handshake is done
// the traffic keys are taken from GnuTLS, GnuTLS lets go of the socket
// without a word (no session ticket, no close_notify), and the keys go to
// the kernel (ktls.go). From there on the data path is the transport's
// own reads and writes on the socket, with no copy through a TLS library
// and no change to its poller; ReadRecord tells apart the records that
// carry no data, which a plain read cannot deliver (record.go).
//
// The priorities follow tlshd's: TLS 1.3 only, the cipher suites the
// kernel can run (TLS_AES_128_GCM_SHA256 and TLS_AES_256_GCM_SHA384,
// which NVMe/TCP requires, and TLS_CHACHA20_POLY1305_SHA256), PSK with
// (EC)DHE whenever the host offers it, for forward secrecy, and without
// for a host that offers nothing else. A PSK's hash is the suite's: 32
// bytes go with SHA-256 suites, 48 with TLS_AES_256_GCM_SHA384. GnuTLS
// before 3.8.11 computes every external PSK's binder with SHA-256, so a
// build against an older GnuTLS refuses 48-byte PSKs, with
// ErrUnsupportedPSK, rather than complete handshakes no NVMe host would
// make.
//
// TLS protects what crosses the network: the host and the controller
// prove to each other that they hold the PSK, and nobody on the path can
// read or alter a PDU unseen. It does not say who the host is beyond the
// identity that goes with the key: the caller holds the Connect command's
// NQNs to the identity. A handshake that fails, for whatever reason the
// host or the path gives it, ends that connection alone, with an error
// that wraps one of this package's sentinels so that it can be counted.
//
// A build without cgo, or with -tags notls, has no GnuTLS: Available
// reports false and Server returns ErrNoGnuTLS; ReadRecord and the
// kernel TLS set-up need no C and are the same in every build.
package ktls
