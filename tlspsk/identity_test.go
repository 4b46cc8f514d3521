package tlspsk

import (
	"errors"
	"strings"
	"testing"
)

const (
	digest256 = "iSbjiStwJ/1TrTvDlt2fjFmzvsytOJelidNnA+X5lEU="
	digest384 = "QhW2+Rp6RzHlNtCslyRxMnwJ11tKKhz8JCAQpQ+XUD8f9td1VeH5h53yz2wKJG1a"
)

func TestParseIdentity(t *testing.T) {
	long := strings.Repeat("n", maxNQNLen)
	for _, c := range []struct {
		in   string
		want Identity
	}{
		{"NVMe0R01 " + testHost + " " + testSub, Identity{0, false, HashSHA256, testHost, testSub, ""}},
		{"NVMe0R02 h s", Identity{0, false, HashSHA384, "h", "s", ""}},
		{"NVMe0G01 h s", Identity{0, true, HashSHA256, "h", "s", ""}},
		{"NVMe1R01 h s " + digest256, Identity{1, false, HashSHA256, "h", "s", digest256}},
		{"NVMe1G02 " + long + " " + long + " " + digest384, Identity{1, true, HashSHA384, long, long, digest384}},
		{"NVMe0R01 ~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|} x", Identity{0, false, HashSHA256, "~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}", "x", ""}},
	} {
		id, err := ParseIdentity(c.in)
		if err != nil || id != c.want {
			t.Errorf("%q: %+v, %v", c.in, id, err)
			continue
		}
		if id.String() != c.in || id.Validate() != nil {
			t.Errorf("%q formats back as %q", c.in, id.String())
		}
	}
}

func TestParseIdentityErrors(t *testing.T) {
	long := strings.Repeat("n", maxNQNLen+1)
	for _, c := range []struct{ name, in, says string }{
		{"empty", "", "does not start"},
		{"prefix only", "NVMe0R01", "does not start"},
		{"lower case", "nvme0R01 h s", "does not start"},
		{"version 2", "NVMe2R01 h s", `version "2"`},
		{"version letter", "NVMeXR01 h s", "version"},
		{"type lower case", "NVMe0r01 h s", `type "r"`},
		{"type D", "NVMe1D01 h s " + digest256, "type"},
		{"hash 00", "NVMe0R00 h s", `hash "00"`},
		{"hash 03", "NVMe0R03 h s", `hash "03"`},
		{"hash 1", "NVMe0R1 h s", "hash"},
		{"no space after the hash", "NVMe0R01_h s", "space after the hash"},
		{"v0 with a digest", "NVMe0R01 h s " + digest256, "version 0 wants 2 fields"},
		{"v0 without a subsystem", "NVMe0R01 h", "not 1"},
		{"v1 without a digest", "NVMe1R01 h s", "version 1 wants 3 fields"},
		{"two spaces", "NVMe0R01 h  s", "separated by single spaces, not 3"},
		{"leading space", "NVMe0R01  h s", "separated by single spaces"},
		{"v1 with an empty host", "NVMe1R01  s " + digest256, "host NQN: empty"},
		{"trailing space", "NVMe0R01 h s ", "version 0 wants 2"},
		{"trailing newline", "NVMe0R01 h s\n", "subsystem NQN"},
		{"tab in the host NQN", "NVMe0R01 h\tx s", "host NQN"},
		{"control byte", "NVMe0R01 h s\x00", "subsystem NQN"},
		{"non-ASCII NQN", "NVMe0R01 h sé", "not printable ASCII"},
		{"host NQN too long", "NVMe0R01 " + long + " s", "224 bytes is longer than 223"},
		{"subsystem NQN too long", "NVMe0R01 h " + long, "subsystem NQN: 224 bytes"},
		{"whole too long", "NVMe1R01 h s " + strings.Repeat("A", 600), "longer than any identity"},
		{"SHA-256 with a SHA-384 digest", "NVMe1R01 h s " + digest384, "32-byte SHA-256 HMAC (44 characters)"},
		{"SHA-384 with a SHA-256 digest", "NVMe1R02 h s " + digest256, "48-byte SHA-384 HMAC (64 characters)"},
		{"digest not base64", "NVMe1R01 h s " + strings.Replace(digest256, "J", "*", 1), "PSK digest"},
		{"digest without padding", "NVMe1R01 h s " + strings.TrimSuffix(digest256, "="), "PSK digest"},
		{"digest with stray bits", "NVMe1R01 h s " + digest256[:42] + "V=", "PSK digest"},
		{"URL-safe digest", "NVMe1R01 h s " + strings.ReplaceAll(digest256, "/", "_"), "PSK digest"},
	} {
		_, err := ParseIdentity(c.in)
		if !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.says)
		}
	}
}

func TestIdentityValidate(t *testing.T) {
	good := Identity{Version: 1, Hash: HashSHA256, HostNQN: "h", SubsysNQN: "s", Digest: digest256}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mod  func(*Identity)
	}{
		{"version 2", func(id *Identity) { id.Version = 2 }},
		{"hash none", func(id *Identity) { id.Hash = HashNone }},
		{"hash 3", func(id *Identity) { id.Hash = 3 }},
		{"v0 with a digest", func(id *Identity) { id.Version = 0 }},
		{"v1 without a digest", func(id *Identity) { id.Digest = "" }},
		{"empty host", func(id *Identity) { id.HostNQN = "" }},
		{"host with a space", func(id *Identity) { id.HostNQN = "a b" }},
		{"subsystem too long", func(id *Identity) { id.SubsysNQN = strings.Repeat("s", 224) }},
	} {
		id := good
		c.mod(&id)
		if err := id.Validate(); !errors.Is(err, ErrIdentity) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestCheckNQN(t *testing.T) {
	for nqn, ok := range map[string]bool{
		testHost: true, uuidHost: true, "hostnqn": true, strings.Repeat("q", 223): true,
		"": false, strings.Repeat("q", 224): false, "a b": false, "a\x7f": false, "a\n": false, "ä": false,
	} {
		if err := CheckNQN(nqn); (err == nil) != ok {
			t.Errorf("%q: %v", nqn, err)
		}
	}
}
