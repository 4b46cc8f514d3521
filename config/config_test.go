package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

var yes, no = true, false

func TestExampleParses(t *testing.T) {
	c, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Log:       Log{Level: "info", Format: "text"},
		Metrics:   Metrics{Address: "127.0.0.1:9750"},
		Control:   Control{Socket: DefaultControlSocket},
		StateFile: DefaultStateFile,
		Limits:    Limits{MaxQueuePairs: DefaultMaxQueuePairs, UnconnectedPerAddress: DefaultUnconnectedPerAddress},
		RDMA:      RDMA{BufferPool: DefaultBufferPool, SharedReceiveQueue: &yes, ReceiveQueueDepth: DefaultReceiveQueueDepth},
		TCP:       TCP{BufferPool: DefaultTCPBufferPool},
		IOEngine:  "auto",
		Ports:     []Port{{ID: 1, Transport: "rdma", Address: "10.0.0.1", Port: 4420, InlineDataSize: 8192, MaxQueueSize: 128}},
		Subsystems: []Subsystem{{
			NQN: "nqn.2026-11.io.example:vol1", AllowAnyHost: true, Hosts: []Host{}, Ports: []uint16{1},
			MaxControllers: DefaultMaxControllers, MaxIOQueues: DefaultMaxIOQueues,
			Namespaces: []Namespace{{NSID: 1, Backend: "file", Path: "/var/lib/nvmeof-tgt/vol1.img", Size: 1 << 30, BlockSize: 512}},
		}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", c, want)
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte(oneSubsystem(`
      - {nsid: 1, backend: nullblk, size: 1GiB}
      - {nsid: 2, backend: block, path: /dev/sdb}`)))
	if err != nil {
		t.Fatal(err)
	}
	p, s := c.Ports[0], c.Subsystems[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"log.level", c.Log.Level, "info"},
		{"log.format", c.Log.Format, "text"},
		{"metrics.address", c.Metrics.Address, ""},
		{"port.transport", p.Transport, "rdma"},
		{"port.port", p.Port, uint16(4420)},
		{"port.inline_data_size", p.InlineDataSize, uint32(8192)},
		{"port.max_queue_size", p.MaxQueueSize, uint16(128)},
		{"subsystem.ports", len(s.Ports), 0},
		{"subsystem.max_controllers", s.MaxControllers, DefaultMaxControllers},
		{"subsystem.max_io_queues", s.MaxIOQueues, DefaultMaxIOQueues},
		{"limits.max_queue_pairs", c.Limits.MaxQueuePairs, DefaultMaxQueuePairs},
		{"limits.unconnected_per_address", c.Limits.UnconnectedPerAddress, DefaultUnconnectedPerAddress},
		{"limits.queue_pairs_per_host", c.Limits.QueuePairsPerHost, 0},
		{"nullblk block_size", s.Namespaces[0].BlockSize, uint32(512)},
		{"block block_size", s.Namespaces[1].BlockSize, uint32(0)},
	}
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			if ck.got != ck.want {
				t.Fatalf("%v, want %v", ck.got, ck.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		{"misspelled key", "ports:\n  - id: 1\n    prot: 4420\n", []string{"line 3", "prot"}},
		{"unknown top-level key", "log: {level: info}\nsubsytems: []\n", []string{"line 2", "subsytems"}},
		{"bad size", "subsystems: [{namespaces: [{size: 1.5GiB}]}]", []string{"line 1", `invalid size "1.5GiB"`}},
		{"size list", "subsystems: [{namespaces: [{size: [1]}]}]", []string{"line 1", "size must be a number"}},
		{"port out of range", "ports: [{id: 70000}]", []string{"70000"}},
		{"empty", "", []string{"configuration is empty"}},
		{"comment only", "# nothing\n", []string{"configuration is empty"}},
		{"not a map", "- 1\n", []string{"line 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load("/nonexistent/config.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	example, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rich := &Config{
		Log:       Log{Level: "debug", Format: "json"},
		Metrics:   Metrics{Address: "[::1]:9750"},
		Control:   Control{Socket: "/run/t/ctl.sock"},
		StateFile: "/var/lib/t/state.json",
		RXE:       []string{"eth1", "ens3"},
		Limits:    Limits{MaxQueuePairs: 300, UnconnectedPerAddress: 20, QueuePairsPerHost: 40},
		RDMA:      RDMA{BufferPool: 64 << 20, SharedReceiveQueue: &no, ReceiveQueueDepth: 1024, PollerCPUs: []int{1, 0}},
		TCP:       TCP{BufferPool: 32 << 20},
		IOEngine:  "threads",
		Ports: []Port{
			{ID: 1, Transport: "rdma", Address: "10.0.0.1", Port: 4420, InlineDataSize: 16384, MaxQueueSize: 1024},
			{ID: 7, Transport: "rdma", Address: "fd00::1", Port: 4421, InlineDataSize: 8192, MaxQueueSize: 2},
		},
		Subsystems: []Subsystem{
			{NQN: "nqn.2026-11.io.example:a", Serial: "0123", Model: "yes", Hosts: []Host{HostNQN("nqn.2014-08.org.nvmexpress:uuid:01234567-89ab-cdef-0123-456789abcdef")},
				Ports: []uint16{7}, MaxControllers: 4, MaxIOQueues: 2, Namespaces: []Namespace{
					{NSID: 1, Backend: "nullblk", Size: 1000 * 4096, BlockSize: 4096, UUID: "01234567-89ab-cdef-0123-456789abcdef"},
					{NSID: 9, Backend: "file", Path: "/srv/a b.img", Size: 3 << 40, BlockSize: 512, ReadOnly: true, Buffered: true},
					{NSID: 10, Backend: "block", Path: "/dev/nvme0n1", BlockSize: 0},
				}},
			{NQN: "nqn.2026-11.io.example:b", AllowAnyHost: true, Hosts: []Host{}, Ports: []uint16{}, MaxControllers: 65519, MaxIOQueues: 128, Namespaces: []Namespace{}},
		},
	}
	for name, c := range map[string]*Config{"example": example, "rich": rich} {
		t.Run(name, func(t *testing.T) {
			if err := c.Validate(); err != nil {
				t.Fatalf("test configuration is invalid: %v", err)
			}
			if back := roundTrip(t, c); !reflect.DeepEqual(c, back) {
				out, _ := Marshal(c)
				t.Fatalf("round trip differs:\n%+v\n%+v\n%s", c, back, out)
			}
		})
	}
}

func TestMarshalSizes(t *testing.T) {
	c := &Config{Subsystems: []Subsystem{{Namespaces: []Namespace{{Size: 1 << 30}, {Size: 1000}, {Size: 0}}}}}
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"size: 1GiB\n", "size: 1000\n", "size: 0\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// writeFile creates a small file at path.
func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
}
