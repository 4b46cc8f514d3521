// Package dhchap owns the cryptography of NVMe in-band authentication,
// DH-HMAC-CHAP (NVMe Base 2.0 §8.13): the DHHC-1 secret representation
// that `nvme gen-dhchap-key` prints, the key transformation, the host and
// controller responses, the augmented challenge and the RFC 7919 FFDHE
// groups. It computes what the Linux host and target compute, byte for
// byte; the controller's state machine lives in package fabrics.
//
// Nothing here logs, and nothing formats a secret: a Secret prints as
// "[redacted]".
package dhchap
