package config

import "testing"

// tcpPort is a configuration of one TCP port and a subsystem without
// namespaces, with the tcp block given.
func tcpPort(tcp string) string {
	return tcp + `
ports: [{id: 1, transport: tcp, address: 10.0.0.1}]
subsystems: [{nqn: "nqn.2026-11.io.example:a", allow_any_host: true}]
`
}

// tcp.buffer_pool: 64 MiB when left out, read as a size, and -check
// names the field of a value out of range.
func TestTCPBufferPool(t *testing.T) {
	c := mustParse(t, tcpPort(""))
	if c.TCP.BufferPool != 64<<20 {
		t.Fatalf("default tcp.buffer_pool %d, want 64MiB", c.TCP.BufferPool)
	}
	c = mustParse(t, tcpPort("tcp: {buffer_pool: 256MiB}"))
	if c.TCP.BufferPool != 256<<20 {
		t.Fatalf("tcp.buffer_pool %d, want 256MiB", c.TCP.BufferPool)
	}
	checkValues(t, func(c *Config, v Size) { c.TCP.BufferPool = v }, "bytes", []valueCase[Size]{
		{512 << 10, "tcp.buffer_pool: 524288 bytes: want a whole number of MiB from 1MiB to 64GiB"},
		{3<<20 + 1, "tcp.buffer_pool: 3145729 bytes: want a whole number of MiB from 1MiB to 64GiB"},
		{65 << 30, "tcp.buffer_pool: 69793218560 bytes: want a whole number of MiB from 1MiB to 64GiB"},
		{1 << 20, ""},
		{64 << 30, ""},
	})
}

// tcp.data_timeout_seconds: 0 (the transport's default) when left out,
// and -check names it when out of range.
func TestTCPDataTimeout(t *testing.T) {
	c := mustParse(t, tcpPort("tcp: {data_timeout_seconds: 7}"))
	if c.TCP.DataTimeoutSeconds != 7 {
		t.Fatalf("tcp.data_timeout_seconds %d, want 7", c.TCP.DataTimeoutSeconds)
	}
	checkValues(t, func(c *Config, v int) { c.TCP.DataTimeoutSeconds = v }, "s", []valueCase[int]{
		{-1, "tcp.data_timeout_seconds: -1: want 1 to 8 seconds, or 0 for the default of 5"},
		{9, "tcp.data_timeout_seconds: 9: want 1 to 8 seconds, or 0 for the default of 5"},
		{0, ""},
		{8, ""},
	})
}

// valueCase is a value of a key and the error Validate must give for it,
// or "" for none.
type valueCase[T ~int | ~int64] struct {
	v    T
	want string
}

// checkValues sets each case's value in a valid configuration with set
// and checks what Validate says; unit follows a value in a message.
func checkValues[T ~int | ~int64](t *testing.T, set func(*Config, T), unit string, cases []valueCase[T]) {
	t.Helper()
	for _, tc := range cases {
		c := validConfig()
		set(c, tc.v)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d %s rejected: %v", tc.v, unit, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%d %s: got %v, want %s", tc.v, unit, err, tc.want)
		}
	}
}
