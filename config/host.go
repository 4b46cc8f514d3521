package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/nvmeof-tgt/nvmeof-tgt/dhchap"
	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"
)

// Host is one allowed host. In the file it is either its NQN alone or an
// object with the NQN and its DH-HMAC-CHAP secrets for in-band
// authentication: inline in the DHHC-1 form `nvme gen-dhchap-key` prints,
// or in a file of their own (one line, readable by the owner only), which
// keeps them out of the main configuration.
type Host struct {
	NQN string `yaml:"nqn" json:"nqn"`
	// DHCHAPKey is the host's secret: a host with one must authenticate.
	DHCHAPKey     string `yaml:"dhchap_key,omitempty" json:"dhchap_key,omitempty"`
	DHCHAPKeyFile string `yaml:"dhchap_key_file,omitempty" json:"dhchap_key_file,omitempty"`
	// DHCHAPCtrlKey is the controller's secret, for hosts that ask the
	// target to authenticate too (bidirectional).
	DHCHAPCtrlKey     string `yaml:"dhchap_ctrl_key,omitempty" json:"dhchap_ctrl_key,omitempty"`
	DHCHAPCtrlKeyFile string `yaml:"dhchap_ctrl_key_file,omitempty" json:"dhchap_ctrl_key_file,omitempty"`
	// DHCHAPHashes and DHCHAPDHGroups narrow the subsystem's lists for
	// this host, in its own order of preference (nvmet keeps one hash
	// and one group per host).
	DHCHAPHashes   []string `yaml:"dhchap_hashes,omitempty" json:"dhchap_hashes,omitempty"`
	DHCHAPDHGroups []string `yaml:"dhchap_dhgroups,omitempty" json:"dhchap_dhgroups,omitempty"`
	// TLSKey is the configured PSK of NVMe/TCP's secure channel, in the
	// NVMeTLSkey-1 form `nvme gen-tls-key` prints: the host derives its
	// TLS PSKs from it, and so does the target (package tlspsk).
	TLSKey     string `yaml:"tls_key,omitempty" json:"tls_key,omitempty"`
	TLSKeyFile string `yaml:"tls_key_file,omitempty" json:"tls_key_file,omitempty"`
	// TLSDerivation is how the host's libnvme derives them: rfc8446 (the
	// default: libnvme 1.16 on), compat (libnvme up to 1.15, or nvme-cli
	// --compat) or libnvme-1.7 (1.7 to 1.9). An identity does not say.
	TLSDerivation string `yaml:"tls_derivation,omitempty" json:"tls_derivation,omitempty"`
}

// HostNQN is a Host with no secrets, as a plain NQN in the file.
func HostNQN(nqn string) Host { return Host{NQN: nqn} }

// Plain reports whether h is a bare NQN.
func (h Host) Plain() bool { return h.Equal(Host{NQN: h.NQN}) }

// Equal reports whether h and o are the same entry.
func (h Host) Equal(o Host) bool {
	return h.NQN == o.NQN && h.DHCHAPKey == o.DHCHAPKey && h.DHCHAPKeyFile == o.DHCHAPKeyFile &&
		h.DHCHAPCtrlKey == o.DHCHAPCtrlKey && h.DHCHAPCtrlKeyFile == o.DHCHAPCtrlKeyFile &&
		slices.Equal(h.DHCHAPHashes, o.DHCHAPHashes) && slices.Equal(h.DHCHAPDHGroups, o.DHCHAPDHGroups) &&
		h.TLSKey == o.TLSKey && h.TLSKeyFile == o.TLSKeyFile && h.TLSDerivation == o.TLSDerivation
}

// clone copies h's lists.
func (h Host) clone() Host {
	h.DHCHAPHashes = slices.Clone(h.DHCHAPHashes)
	h.DHCHAPDHGroups = slices.Clone(h.DHCHAPDHGroups)
	return h
}

// hostFields is Host without its methods, for decoding the object form.
type hostFields Host

// UnmarshalYAML takes a scalar NQN or the object form.
func (h *Host) UnmarshalYAML(n *yaml.Node) error {
	return decodeShortForm(n, (*hostFields)(h), &h.NQN, "host", hostKeys)
}

var hostKeys = []string{"nqn", "dhchap_key", "dhchap_key_file", "dhchap_ctrl_key", "dhchap_ctrl_key_file",
	"dhchap_hashes", "dhchap_dhgroups", "tls_key", "tls_key_file", "tls_derivation"}

// MarshalYAML writes a host without secrets as its NQN alone, as before.
func (h Host) MarshalYAML() (any, error) {
	if h.Plain() {
		return h.NQN, nil
	}
	return hostFields(h), nil
}

// UnmarshalJSON takes a string NQN or the object form.
func (h *Host) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*h = Host{NQN: s}
		return nil
	}
	// Strict, as the admin socket's parameters are.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f hostFields
	if err := dec.Decode(&f); err != nil {
		return err
	}
	*h = Host(f)
	return nil
}

// MarshalJSON writes a host without secrets as its NQN alone.
func (h Host) MarshalJSON() ([]byte, error) {
	if h.Plain() {
		return json.Marshal(h.NQN)
	}
	return json.Marshal(hostFields(h))
}

// HasKey reports whether the host must authenticate.
func (h Host) HasKey() bool { return h.DHCHAPKey != "" || h.DHCHAPKeyFile != "" }

// Redacted stands where an inline secret was, in what the daemon writes
// back (ctl save, the admin socket). It is not a DHHC-1 secret, so a file
// carrying it fails -check until the secret is put back.
const Redacted = "<redacted>"

// Redact returns h with inline secrets replaced by Redacted, and how many
// it replaced. File references stay as they are.
func (h Host) Redact() (Host, int) {
	n := 0
	for _, k := range []*string{&h.DHCHAPKey, &h.DHCHAPCtrlKey, &h.TLSKey} {
		if *k != "" {
			*k, n = Redacted, n+1
		}
	}
	return h, n
}

// Secrets reads and decodes the host's secrets (nil where none is set).
// Errors name the field.
func (h Host) Secrets() (host, ctrl *dhchap.Secret, err error) {
	host, err = secret(h.DHCHAPKey, h.DHCHAPKeyFile, "dhchap_key")
	if err != nil {
		return nil, nil, err
	}
	ctrl, err = secret(h.DHCHAPCtrlKey, h.DHCHAPCtrlKeyFile, "dhchap_ctrl_key")
	if err != nil {
		host.Clear()
		return nil, nil, err
	}
	return host, ctrl, nil
}

// fieldError is a problem with one field of a host entry.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func secret(inline, file, field string) (*dhchap.Secret, error) {
	return keyField(inline, file, field, "secret", dhchap.ParseSecret)
}

// keyField reads a key given inline or in a file (field and field_file)
// with parse; what names it in the message for a redacted one.
func keyField[K any](inline, file, field, what string, parse func(string) (K, error)) (K, error) {
	var none K
	switch {
	case inline != "" && file != "":
		return none, &fieldError{field, fmt.Errorf("set %s or %s_file, not both", field, field)}
	case inline == Redacted:
		return none, &fieldError{field, fmt.Errorf("the %s was redacted when this file was saved: write it back, or keep it in %s_file", what, field)}
	case inline != "":
		k, err := parse(inline)
		if err != nil {
			return none, &fieldError{field, err}
		}
		return k, nil
	case file != "":
		k, err := readKeyFileAs(file, parse)
		if err != nil {
			return none, &fieldError{field + "_file", err}
		}
		return k, nil
	}
	return none, nil
}

// maxKeyFileSize bounds a key file: a DHHC-1 secret of 64 bytes is 101
// characters.
const maxKeyFileSize = 4 << 10

// readKeyFileAs reads a key file and parses it. The checks are made on the
// file opened, not on its path, so it cannot be swapped in between: not
// through a symbolic link, a regular file (a FIFO would block the read
// while the configuration is locked), owned by the daemon's user or root,
// which only its owner may read, and no larger than a secret.
func readKeyFileAs[K any](path string, parse func(string) (K, error)) (K, error) {
	var none K
	b, err := readKeyFile(path)
	if err != nil {
		return none, err
	}
	defer clear(b)
	k, err := parse(string(b))
	if err != nil {
		return none, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// readKeyFile reads a key file with readKeyFileAs's checks; the caller
// clears what it returns once done.
func readKeyFile(path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%q is not an absolute path", path)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == unix.ELOOP {
		return nil, fmt.Errorf("%s is a symbolic link: name the key file itself", path)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if err := checkKeyFile(path, &st); err != nil {
		return nil, err
	}
	b := make([]byte, maxKeyFileSize+1)
	n, err := io.ReadFull(f, b)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		clear(b)
		return nil, err
	}
	if n > maxKeyFileSize {
		clear(b)
		return nil, fmt.Errorf("%s is larger than a secret (%d bytes at most)", path, maxKeyFileSize)
	}
	return b[:n], nil
}

// checkKeyFile checks the type, owner, mode and size of an open key file.
func checkKeyFile(path string, st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
		return fmt.Errorf("%s is owned by uid %d, not by the daemon's user (uid %d) or root: chown it", path, st.Uid, uid)
	}
	if perm := st.Mode & 0o777; perm&0o077 != 0 {
		return fmt.Errorf("%s is readable or writable by others (mode %04o): chmod 600 it", path, perm)
	}
	if st.Size > maxKeyFileSize {
		return fmt.Errorf("%s is larger than a secret (%d bytes at most)", path, maxKeyFileSize)
	}
	return nil
}

// Hash and DH group names of dhchap_hashes and dhchap_dhgroups.
var (
	DHCHAPHashes   = dhchap.HashNames()
	DHCHAPDHGroups = dhchap.GroupNames()
)

// HostNQNs lists the NQNs of the allowed hosts.
func (s Subsystem) HostNQNs() []string {
	out := make([]string, len(s.Hosts))
	for i, h := range s.Hosts {
		out[i] = h.NQN
	}
	return out
}

// Redact returns a copy of c with every inline secret replaced by
// Redacted, and how many were replaced.
func (c *Config) Redact() (*Config, int) {
	out := c.Clone()
	n := 0
	for i := range out.Subsystems {
		for j, h := range out.Subsystems[i].Hosts {
			var k int
			out.Subsystems[i].Hosts[j], k = h.Redact()
			n += k
		}
	}
	return out, n
}
