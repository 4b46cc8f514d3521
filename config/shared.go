package config

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// The shared configuration of a gateway group (gateway.shared_config):
// the subsystems, with their namespaces, hosts and keys, visibility, QoS
// and ANA groups, kept once in an object of the gateway's pool that every
// gateway of the group applies. The daemon's file keeps what is its own:
// its name, ports, the ceph block, the gateway block and the limits, and
// the controller IDs it hands out in every shared subsystem.
//
// DH-HMAC-CHAP secrets written inline are sealed in the object with
// AES-256-GCM under the group's secret key (gateway.secret_key_file), a
// file on each gateway that only the daemon's user reads: whoever can
// read the pool sees the hosts and their key files' paths, not the
// secrets. Each sealed value is bound to its subsystem, host and field,
// so one cannot be moved to another host.

// Shared is the content of the shared configuration object.
type Shared struct {
	// Version counts the changes: each one writes Version+1 by a
	// compare-and-set on the version it read.
	Version    uint64      `yaml:"version"`
	Subsystems []Subsystem `yaml:"subsystems"`
}

// sharedHeader opens the object, for whoever reads it with rados get.
const sharedHeader = "# nvmeof-tgt: the gateway group's shared configuration. Changed through any gateway's\n# API or ctl, never by hand: the gateways write it by compare-and-set on version.\n"

// sealedPrefix marks a sealed secret in the object.
const sealedPrefix = "sealed:"

// ConfigObject is the name of the group's shared configuration object.
func (g *Gateway) ConfigObject() string { return g.LeasePrefix + ".config" }

// Shared is c's part that the gateway group shares: its subsystems,
// without what is each gateway's own: the controller IDs, and the
// cluster connection a namespace inherits from the file's ceph block.
func (c *Config) Shared() []Subsystem {
	inherited := c.Ceph.inherit(Ceph{Conf: DefaultCephConf, User: DefaultCephUser})
	subs := c.Clone().Subsystems
	for i := range subs {
		subs[i].CntlidMin, subs[i].CntlidMax = 0, 0
		for j := range subs[i].Namespaces {
			if n := &subs[i].Namespaces[j]; n.Ceph == inherited {
				n.Ceph = Ceph{}
			}
		}
	}
	return subs
}

// WithShared is c with the group's subsystems in place of its own, each
// handing out this gateway's controller IDs (gateway.cntlid_min and
// cntlid_max), and defaulted as a file's would be.
func (c *Config) WithShared(subs []Subsystem) *Config {
	out := c.Clone()
	out.Subsystems = (&Config{Subsystems: subs}).Clone().Subsystems
	for i := range out.Subsystems {
		out.Subsystems[i].CntlidMin, out.Subsystems[i].CntlidMax = c.Gateway.CntlidMin, c.Gateway.CntlidMax
	}
	out.ApplyDefaults()
	return out
}

// MarshalShared encodes s for the object, sealing every inline secret
// with key. Without a key an inline secret is an error: it would be
// written in clear.
func MarshalShared(s Shared, key []byte) ([]byte, error) {
	s.Subsystems = (&Config{Subsystems: s.Subsystems}).Clone().Subsystems
	if err := sealSecrets(s.Subsystems, key, seal); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(sharedHeader)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ParseShared decodes the object strictly and unseals its secrets with
// key.
func ParseShared(data, key []byte) (Shared, error) {
	var s Shared
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return Shared{}, errors.New("the shared configuration object is empty")
		}
		return Shared{}, fmt.Errorf("parse: %w", err)
	}
	if err := sealSecrets(s.Subsystems, key, unseal); err != nil {
		return Shared{}, err
	}
	return s, nil
}

// sealSecrets runs f (seal or unseal) on every inline secret of subs,
// with what binds it: the subsystem's NQN, the host's and the field.
func sealSecrets(subs []Subsystem, key []byte, f func(v, bind string, key []byte) (string, error)) error {
	for i := range subs {
		for j := range subs[i].Hosts {
			h := &subs[i].Hosts[j]
			for _, fld := range []struct {
				name string
				v    *string
			}{{"dhchap_key", &h.DHCHAPKey}, {"dhchap_ctrl_key", &h.DHCHAPCtrlKey}, {"tls_key", &h.TLSKey}} {
				if *fld.v == "" {
					continue
				}
				out, err := f(*fld.v, subs[i].NQN+"\x00"+h.NQN+"\x00"+fld.name, key)
				if err != nil {
					return fmt.Errorf("subsystem %s host %s %s: %w", subs[i].NQN, h.NQN, fld.name, err)
				}
				*fld.v = out
			}
		}
	}
	return nil
}

func seal(v, bind string, key []byte) (string, error) {
	if key == nil {
		return "", errors.New("an inline secret cannot be shared in clear: set gateway.secret_key_file on every gateway of the group, or name a key file (dhchap_key_file) each gateway holds")
	}
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return sealedPrefix + base64.StdEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(v), []byte(bind))), nil
}

func unseal(v, bind string, key []byte) (string, error) {
	enc, ok := strings.CutPrefix(v, sealedPrefix)
	if !ok {
		return "", errors.New("a secret in clear in the shared configuration: the gateways only write sealed ones")
	}
	if key == nil {
		return "", errors.New("the secret is sealed and this gateway has no gateway.secret_key_file")
	}
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(b) < aead.NonceSize() {
		return "", errors.New("a sealed secret that does not decode")
	}
	plain, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte(bind))
	if err != nil {
		return "", errors.New("the sealed secret does not open with this gateway's secret key: every gateway of the group needs the same gateway.secret_key_file")
	}
	return string(plain), nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(blk)
}

// ReadSecretKey reads the group's secret key file: 32 random bytes in
// hex (`openssl rand -hex 32`), with a DH-HMAC-CHAP key file's checks (a
// regular file, not a link, owned by the daemon's user or root, mode 600).
func ReadSecretKey(path string) ([]byte, error) {
	b, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	defer clear(b)
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("%s: want 32 bytes in hex, 64 characters (openssl rand -hex 32)", path)
	}
	return key, nil
}
