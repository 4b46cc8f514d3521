package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// validConfig is a minimal valid configuration, defaults applied.
func validConfig() *Config {
	c := &Config{
		Ports: []Port{{ID: 1, Address: "10.0.0.1"}},
		Subsystems: []Subsystem{{
			NQN: "nqn.2026-11.io.example:a", AllowAnyHost: true,
			Namespaces: []Namespace{
				{NSID: 1, Backend: "nullblk", Size: 1 << 30},
				{NSID: 2, Backend: "file", Path: "/srv/b.img", Size: 1 << 20},
			},
		}},
	}
	c.ApplyDefaults()
	return c
}

func TestValidConfig(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// validateCase changes one thing in validConfig and expects exactly one
// line, naming the field path, or "" for a configuration still valid.
type validateCase struct {
	name   string
	mutate func(c *Config)
	want   string
}

var validateCases = []validateCase{
	{"log level", func(c *Config) { c.Log.Level = "loud" }, `log.level: unknown level "loud" (want debug, info, warn or error)`},
	{"log format", func(c *Config) { c.Log.Format = "xml" }, `log.format: unknown format "xml" (want text or json)`},
	{"metrics no port", func(c *Config) { c.Metrics.Address = "127.0.0.1" }, `metrics.address: "127.0.0.1" is not host:port`},
	{"metrics bad port", func(c *Config) { c.Metrics.Address = ":http" }, `metrics.address: ":http": port "http" is not a number from 0 to 65535`},
	{"metrics any address", func(c *Config) { c.Metrics.Address = ":9750" }, ""},
	{"no ports", func(c *Config) { c.Ports = nil }, "ports: at least one port is required"},
	{"port id 0", func(c *Config) { c.Ports[0].ID = 0 }, "ports[0].id: must be 1 or more"},
	{"port id twice", func(c *Config) { c.Ports = append(c.Ports, c.Ports[0]) }, "ports[1].id: port 1 is defined twice\nports[1]: listens on rdma 10.0.0.1:4420 as ports[0] does"},
	{"transport", func(c *Config) { c.Ports[0].Transport = "iwarp" }, `ports[0].transport: unknown transport "iwarp" (want rdma or tcp)`},
	{"transport tcp", func(c *Config) { c.Ports[0].Transport = "tcp" }, ""},
	{"rdma and tcp on one address and port", func(c *Config) {
		p := c.Ports[0]
		p.ID, p.Transport = 2, "tcp"
		c.Ports = append(c.Ports, p)
	}, ""},
	{"tcp address and port twice", func(c *Config) {
		c.Ports[0].Transport = "tcp"
		p := c.Ports[0]
		p.ID = 2
		c.Ports = append(c.Ports, p)
	}, "ports[1]: listens on tcp 10.0.0.1:4420 as ports[0] does"},
	{"address host name", func(c *Config) { c.Ports[0].Address = "host.example" }, `ports[0].address: "host.example" is not an IPv4 or IPv6 address`},
	{"address empty", func(c *Config) { c.Ports[0].Address = "" }, `ports[0].address: "" is not an IPv4 or IPv6 address`},
	{"address IPv6", func(c *Config) { c.Ports[0].Address = "fd00::1" }, ""},
	{"port number 0", func(c *Config) { c.Ports[0].Port = 0 }, "ports[0].port: must be 1 or more"},
	{"inline too large", func(c *Config) { c.Ports[0].InlineDataSize = 256 << 10 }, "ports[0].inline_data_size: 262144 must be a multiple of 16 and at most 131072"},
	{"inline unaligned", func(c *Config) { c.Ports[0].InlineDataSize = 1000 }, "ports[0].inline_data_size: 1000 must be a multiple of 16 and at most 131072"},
	{"inline largest", func(c *Config) { c.Ports[0].InlineDataSize = 128 << 10 }, ""},
	{"queue too small", func(c *Config) { c.Ports[0].MaxQueueSize = 1 }, "ports[0].max_queue_size: 1 is out of range 2..1024"},
	{"queue too large", func(c *Config) { c.Ports[0].MaxQueueSize = 2048 }, "ports[0].max_queue_size: 2048 is out of range 2..1024"},
	{"relative state file", func(c *Config) { c.StateFile = "state.json" }, `state_file: "state.json" is not an absolute path`},
	{"io engine", func(c *Config) { c.IOEngine = "aio" }, `io_engine: unknown engine "aio" (want auto, io_uring or threads)`},
	{"no queue pairs", func(c *Config) { c.Limits.MaxQueuePairs = 1 }, "limits.max_queue_pairs: 1 is out of range 2..8192 (an admin and an I/O queue at least)"},
	{"too many queue pairs", func(c *Config) { c.Limits.MaxQueuePairs = 8193 }, "limits.max_queue_pairs: 8193 is out of range 2..8192 (an admin and an I/O queue at least)"},
	{"fewest queue pairs", func(c *Config) { c.Limits.MaxQueuePairs = 2 }, ""},
	{"no unconnected queue pair", func(c *Config) { c.Limits.UnconnectedPerAddress = -1 }, "limits.unconnected_per_address: -1 is below 1 (a host's admin queue)"},
	{"one queue pair per host", func(c *Config) { c.Limits.QueuePairsPerHost = 1 }, "limits.queue_pairs_per_host: 1 admits no I/O queue: 2 at least (an admin and an I/O queue), or 0 for no cap"},
	{"buffer pool not whole MiB", func(c *Config) { c.RDMA.BufferPool = 3<<20 + 1 }, "rdma.buffer_pool: 3145729 bytes: want a whole number of MiB from 1MiB to 64GiB"},
	{"buffer pool too small", func(c *Config) { c.RDMA.BufferPool = 512 << 10 }, "rdma.buffer_pool: 524288 bytes: want a whole number of MiB from 1MiB to 64GiB"},
	{"smallest buffer pool", func(c *Config) { c.RDMA.BufferPool = 1 << 20 }, ""},
	{"shallow receive queue", func(c *Config) { c.RDMA.ReceiveQueueDepth = 63 }, "rdma.receive_queue_depth: 63 is out of range 64..65536"},
	{"negative poller CPU", func(c *Config) { c.RDMA.PollerCPUs = []int{0, -1} }, "rdma.poller_cpus[1]: -1 is not a CPU number (0..4095)"},
	{"no controllers", func(c *Config) { c.Subsystems[0].MaxControllers = -1 }, "subsystems[0].max_controllers: -1 is out of range 1..65519"},
	{"too many controllers", func(c *Config) { c.Subsystems[0].MaxControllers = 0xfff0 }, "subsystems[0].max_controllers: 65520 is out of range 1..65519"},
	{"one controller", func(c *Config) { c.Subsystems[0].MaxControllers = 1 }, ""},
	{"no I/O queues", func(c *Config) { c.Subsystems[0].MaxIOQueues = -2 }, "subsystems[0].max_io_queues: -2 is out of range 1..128"},
	{"too many I/O queues", func(c *Config) { c.Subsystems[0].MaxIOQueues = 129 }, "subsystems[0].max_io_queues: 129 is out of range 1..128"},
	{"most I/O queues", func(c *Config) { c.Subsystems[0].MaxIOQueues = 128 }, ""},
	{"ANA state", func(c *Config) { c.Ports[0].ANA = map[uint32]string{2: "standby"} }, `ports[0].ana[2]: unknown ANA state "standby" (want optimized, non_optimized, inaccessible, persistent_loss, change)`},
	{"ANA group 0", func(c *Config) { c.Ports[0].ANA = map[uint32]string{0: "optimized"} }, "ports[0].ana[0]: ANA group 0 is out of range 1..128"},
	{"ANA states", func(c *Config) { c.Ports[0].ANA = map[uint32]string{1: "inaccessible", 128: "change"} }, ""},
	{"namespace ANA group", func(c *Config) { c.Subsystems[0].Namespaces[0].ANAGroup = 129 }, "subsystems[0].namespaces[0].ana_group: 129 is out of range 1..128"},
	{"referral address", func(c *Config) { c.Ports[0].Referrals = []Referral{{"rdma", "host-b", 4420}} }, `ports[0].referrals[0].address: "host-b" is not an IPv4 or IPv6 address`},
	{"referral transport", func(c *Config) { c.Ports[0].Referrals = []Referral{{"udp", "10.0.0.9", 4420}} }, `ports[0].referrals[0].transport: unknown transport "udp" (want rdma or tcp)`},
	{"referral over tcp", func(c *Config) { c.Ports[0].Referrals = []Referral{{"tcp", "10.0.0.9", 8009}} }, ""},
	{"referral to the tcp port of the same address", func(c *Config) { c.Ports[0].Referrals = []Referral{{"tcp", c.Ports[0].Address, c.Ports[0].Port}} }, ""},
	{"referral to itself", func(c *Config) { c.Ports[0].Referrals = []Referral{{"rdma", c.Ports[0].Address, c.Ports[0].Port}} }, "ports[0].referrals[0]: refers to this port itself"},
	{"cntlid range reversed", func(c *Config) { c.Subsystems[0].CntlidMin, c.Subsystems[0].CntlidMax = 200, 100 }, "subsystems[0].cntlid_min: controller ID range 200..100 is not within 1..65519"},
	{"cntlid range reserved", func(c *Config) { c.Subsystems[0].CntlidMax = 0xfff0 }, "subsystems[0].cntlid_min: controller ID range 1..65520 is not within 1..65519"},
	{"cntlid range", func(c *Config) { c.Subsystems[0].CntlidMin, c.Subsystems[0].CntlidMax = 100, 199 }, ""},
	{"relative control socket", func(c *Config) { c.Control.Socket = "ctl.sock" }, `control.socket: "ctl.sock" is not an absolute path`},
	{"bad rxe netdev", func(c *Config) { c.RXE = []string{"eth0", "a/b"} }, `rxe[1]: "a/b" is not a network interface name`},
	{"nqn missing", func(c *Config) { c.Subsystems[0].NQN = "" }, "subsystems[0].nqn: required"},
	{"nqn with space", func(c *Config) { c.Subsystems[0].NQN = "nqn.2026-11.io.example:a b" }, `subsystems[0].nqn: "nqn.2026-11.io.example:a b" must be printable ASCII without spaces`},
	{"nqn too long", func(c *Config) { c.Subsystems[0].NQN = "nqn." + strings.Repeat("x", 220) }, "subsystems[0].nqn: 224 bytes is longer than 223"},
	{"nqn longest", func(c *Config) { c.Subsystems[0].NQN = "nqn." + strings.Repeat("x", 219) }, ""},
	{"nqn space", func(c *Config) { c.Subsystems[0].NQN = "nqn.a b" }, `subsystems[0].nqn: "nqn.a b" must be printable ASCII without spaces`},
	{"discovery nqn", func(c *Config) { c.Subsystems[0].NQN = DiscoveryNQN }, `subsystems[0].nqn: "nqn.2014-08.org.nvmexpress.discovery" is reserved for the discovery subsystem`},
	{"nqn twice", func(c *Config) {
		c.Subsystems = append(c.Subsystems, Subsystem{NQN: c.Subsystems[0].NQN, AllowAnyHost: true, MaxControllers: 1, MaxIOQueues: 1})
	}, `subsystems[1].nqn: "nqn.2026-11.io.example:a" is defined twice`},
	{"serial too long", func(c *Config) { c.Subsystems[0].Serial = strings.Repeat("1", 21) }, "subsystems[0].serial: must be at most 20 printable ASCII characters"},
	{"serial not ASCII", func(c *Config) { c.Subsystems[0].Serial = "é" }, "subsystems[0].serial: must be at most 20 printable ASCII characters"},
	{"model too long", func(c *Config) { c.Subsystems[0].Model = strings.Repeat("m", 41) }, "subsystems[0].model: must be at most 40 printable ASCII characters"},
	{"nobody may connect", func(c *Config) { c.Subsystems[0].AllowAnyHost = false }, "subsystems[0].hosts: no host may connect: set allow_any_host: true or list hosts"},
	{"uuid host", func(c *Config) {
		c.Subsystems[0].AllowAnyHost = false
		c.Subsystems[0].Hosts = []Host{HostNQN("nqn.2014-08.org.nvmexpress:uuid:01234567-89ab-cdef-0123-456789abcdef")}
	}, ""},
	{"bad host", func(c *Config) { c.Subsystems[0].Hosts = []Host{HostNQN("host\x01")} }, `subsystems[0].hosts[0]: "host\x01" must be printable ASCII without spaces`},
	{"host twice", func(c *Config) { c.Subsystems[0].Hosts = []Host{HostNQN("nqn.h"), HostNQN("nqn.h")} }, `subsystems[0].hosts[1]: "nqn.h" is listed twice`},
	{"no such port", func(c *Config) { c.Subsystems[0].Ports = []uint16{9} }, "subsystems[0].ports[0]: no port has id 9"},
	{"port twice", func(c *Config) { c.Subsystems[0].Ports = []uint16{1, 1} }, "subsystems[0].ports[1]: port 1 is listed twice"},
	{"no namespaces", func(c *Config) { c.Subsystems[0].Namespaces = nil }, ""},
	{"nsid 0", func(c *Config) { c.Subsystems[0].Namespaces[1].NSID = 0 }, "subsystems[0].namespaces[1].nsid: 0 is out of range 1..1024"},
	{"nsid above NN", func(c *Config) { c.Subsystems[0].Namespaces[1].NSID = 1025 }, "subsystems[0].namespaces[1].nsid: 1025 is out of range 1..1024"},
	{"nsid reserved", func(c *Config) { c.Subsystems[0].Namespaces[1].NSID = 0xfffffffe }, "subsystems[0].namespaces[1].nsid: 4294967294 is out of range 1..1024"},
	{"nsid largest", func(c *Config) { c.Subsystems[0].Namespaces[1].NSID = 1024 }, ""},
	{"nsid twice", func(c *Config) { c.Subsystems[0].Namespaces[1].NSID = 1 }, "subsystems[0].namespaces[1].nsid: nsid 1 is defined twice"},
	{"nsid in two subsystems", func(c *Config) {
		c.Subsystems = append(c.Subsystems, Subsystem{NQN: "nqn.2026-11.io.example:b", AllowAnyHost: true, MaxControllers: 1, MaxIOQueues: 1,
			Namespaces: []Namespace{{NSID: 1, Backend: "nullblk", Size: 4096, BlockSize: 512}}})
	}, ""},
	{"misspelled backend", func(c *Config) { c.Subsystems[0].Namespaces[1].Backend = "flie" }, `subsystems[0].namespaces[1].backend: unknown backend "flie" (want file, block, rbd or nullblk)`},
	{"null backend", func(c *Config) { c.Subsystems[0].Namespaces[0].Backend = "" }, `subsystems[0].namespaces[0].backend: unknown backend "" (want file, block, rbd or nullblk; write nullblk, since YAML reads null as no value)`},
	{"rbd", func(c *Config) { c.Subsystems[0].Namespaces[1] = rbdNamespace() }, ""},
	{"rbd created", func(c *Config) {
		ns := rbdNamespace()
		ns.Create, ns.Size, ns.RadosNamespace = true, 1<<30, "tenant1"
		c.Subsystems[0].Namespaces[1] = ns
	}, ""},
	{"rbd without pool and image", func(c *Config) {
		ns := rbdNamespace()
		ns.Pool, ns.Image = "", ""
		c.Subsystems[0].Namespaces[1] = ns
	}, "subsystems[0].namespaces[1].pool: required for the rbd backend\nsubsystems[0].namespaces[1].image: required for the rbd backend"},
	{"rbd image with a slash", func(c *Config) {
		ns := rbdNamespace()
		ns.Image = "a/b"
		c.Subsystems[0].Namespaces[1] = ns
	}, `subsystems[0].namespaces[1].image: "a/b" must be printable ASCII without spaces, / or @, at most 255 bytes`},
	{"rbd with a path", func(c *Config) {
		ns := rbdNamespace()
		ns.Path = "/dev/rbd0"
		c.Subsystems[0].Namespaces[1] = ns
	}, "subsystems[0].namespaces[1].path: not used by the rbd backend (name the image with pool and image)"},
	{"rbd create without size", func(c *Config) {
		ns := rbdNamespace()
		ns.Create = true
		c.Subsystems[0].Namespaces[1] = ns
	}, "subsystems[0].namespaces[1].size: required with create: true (the size of the image to create)"},
	{"rbd size without create", func(c *Config) {
		ns := rbdNamespace()
		ns.Size = 1 << 30
		c.Subsystems[0].Namespaces[1] = ns
	}, "subsystems[0].namespaces[1].size: only with create: true: an rbd namespace takes its size from the image (rbd resize, then reload)"},
	{"rbd ceph keys", func(c *Config) {
		ns := rbdNamespace()
		ns.Ceph = Ceph{Conf: "ceph.conf", User: "client.", Keyring: "k"}
		c.Subsystems[0].Namespaces[1] = ns
	}, "subsystems[0].namespaces[1].ceph.conf: \"ceph.conf\" must be an absolute path\n" +
		"subsystems[0].namespaces[1].ceph.keyring: \"k\" must be an absolute path\n" +
		`subsystems[0].namespaces[1].ceph.user: "client." is not a cephx user name (such as nvmeof, for client.nvmeof)`},
	{"top-level ceph", func(c *Config) { c.Ceph = Ceph{Conf: "/etc/ceph/ceph.conf", User: "bad user"} },
		`ceph.user: "bad user" is not a cephx user name (such as nvmeof, for client.nvmeof)`},
	{"rbd keys on a file namespace", func(c *Config) {
		c.Subsystems[0].Namespaces[1].Pool = "rbd"
		c.Subsystems[0].Namespaces[1].Ceph.User = "nvmeof"
	}, "subsystems[0].namespaces[1].pool: only for the rbd backend\nsubsystems[0].namespaces[1].ceph: only for the rbd backend"},
	{"file without path", func(c *Config) { c.Subsystems[0].Namespaces[1].Path = "" }, "subsystems[0].namespaces[1].path: required for the file backend"},
	{"relative path", func(c *Config) { c.Subsystems[0].Namespaces[1].Path = "b.img" }, `subsystems[0].namespaces[1].path: "b.img" must be an absolute path`},
	{"new file without size", func(c *Config) { c.Subsystems[0].Namespaces[1].Size = 0 }, "subsystems[0].namespaces[1].size: required: the file does not exist yet"},
	{"block without path", func(c *Config) {
		c.Subsystems[0].Namespaces[1] = Namespace{NSID: 2, Backend: "block"}
	}, "subsystems[0].namespaces[1].path: required for the block backend"},
	{"nullblk without size", func(c *Config) { c.Subsystems[0].Namespaces[0].Size = 0 }, "subsystems[0].namespaces[0].size: required for the nullblk backend"},
	{"block size", func(c *Config) { c.Subsystems[0].Namespaces[0].BlockSize = 1024 }, "subsystems[0].namespaces[0].block_size: 1024 is not 512 or 4096"},
	{"block size 0 for a file", func(c *Config) { c.Subsystems[0].Namespaces[1].BlockSize = 0 }, "subsystems[0].namespaces[1].block_size: 0 is not 512 or 4096"},
	{"size not whole blocks", func(c *Config) {
		c.Subsystems[0].Namespaces[0].BlockSize = 4096
		c.Subsystems[0].Namespaces[0].Size = 1536
	}, "subsystems[0].namespaces[0].size: 1536 is not a multiple of block_size 4096"},
	{"bad uuid", func(c *Config) { c.Subsystems[0].Namespaces[0].UUID = "nope" }, `subsystems[0].namespaces[0].uuid: "nope" is not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)`},
	{"nil uuid", func(c *Config) { c.Subsystems[0].Namespaces[0].UUID = "00000000-0000-0000-0000-000000000000" }, "subsystems[0].namespaces[0].uuid: the nil UUID is reserved; leave uuid empty to derive one"},
	{"uuid twice", func(c *Config) {
		c.Subsystems[0].Namespaces[0].UUID = "01234567-89ab-cdef-0123-456789abcdef"
		c.Subsystems[0].Namespaces[1].UUID = "01234567-89AB-CDEF-0123-456789ABCDEF"
	}, "subsystems[0].namespaces[1].uuid: 01234567-89AB-CDEF-0123-456789ABCDEF is already used by subsystems[0].namespaces[0]"},
}

// TestValidate runs validateCases, and the case that needs a file on disk.
func TestValidate(t *testing.T) {
	existing := filepath.Join(t.TempDir(), "vol.img")
	writeFile(t, existing)
	cases := append(validateCases, validateCase{"existing file without size", func(c *Config) {
		c.Subsystems[0].Namespaces[1].Size = 0
		c.Subsystems[0].Namespaces[1].Path = existing
	}, ""})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mutate(c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("got %v, want Errors", err)
			}
			if err.Error() != tc.want {
				t.Fatalf("got\n%v\nwant\n%s", err, tc.want)
			}
		})
	}
}

// TestValidateReportsAll checks that every problem of a file comes back at
// once, one per line, in file order.
func TestValidateReportsAll(t *testing.T) {
	_, err := Parse([]byte(`
log: {level: loud}
ports: [{id: 1, address: 10.0.0.1}, {id: 1, address: not-an-ip}]
subsystems:
  - nqn: nqn.2026-11.io.example:a
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: nullblk, size: 1GiB}
      - {nsid: 1, backend: null, size: 1MiB}
  - nqn: bad nqn
`))
	want := strings.Join([]string{
		`log.level: unknown level "loud" (want debug, info, warn or error)`,
		`ports[1].id: port 1 is defined twice`,
		`ports[1].address: "not-an-ip" is not an IPv4 or IPv6 address`,
		`subsystems[0].namespaces[1].nsid: nsid 1 is defined twice`,
		`subsystems[0].namespaces[1].backend: unknown backend "" (want file, block, rbd or nullblk; write nullblk, since YAML reads null as no value)`,
		`subsystems[1].nqn: "bad nqn" must be printable ASCII without spaces`,
		`subsystems[1].hosts: no host may connect: set allow_any_host: true or list hosts`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	var es Errors
	if !errors.As(err, &es) || len(es) != 7 || es[5].Path != "subsystems[1].nqn" {
		t.Fatalf("Errors not usable by field: %#v", es)
	}
}

// rbdNamespace is a valid rbd namespace, as ApplyDefaults leaves it.
func rbdNamespace() Namespace {
	return Namespace{NSID: 2, Backend: "rbd", BlockSize: 512, Pool: "rbd", Image: "vol1",
		Ceph: Ceph{Conf: DefaultCephConf, User: "nvmeof", Keyring: "/etc/ceph/ceph.client.nvmeof.keyring"}}
}
