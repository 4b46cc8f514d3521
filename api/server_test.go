package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// memConn is a connection whose client side is a fixed script: serveConn
// over it runs to the script's end, synchronously.
type memConn struct {
	in  io.Reader
	out bytes.Buffer
}

func (c *memConn) Read(p []byte) (int, error)       { return c.in.Read(p) }
func (c *memConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// rawResponse is a response as a client reads it.
type rawResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *Error          `json:"error"`
}

const hello = `{"jsonrpc":"2.0","id":0,"method":"get_version"}`

// exchange feeds input to one connection of a and returns the responses.
func exchange(t testing.TB, a *Handler, input string) []rawResponse {
	t.Helper()
	c := &memConn{in: strings.NewReader(input)}
	a.ServeConn(c)
	var out []rawResponse
	sc := bufio.NewScanner(&c.out)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r rawResponse
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("response %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// envelopeCases: one bad line after the handshake, the code it gets, and
// whether the connection closes after it (the probe line is not answered).
var envelopeCases = []struct {
	name, line string
	code       int
	field      string
	closes     bool
	echoesID   bool
}{
	{"not JSON", `{"jsonrpc":"2.0",`, CodeParseError, "", true, false},
	{"batch", `[{"jsonrpc":"2.0","id":1,"method":"get_state"}]`, CodeInvalidRequest, "", false, false},
	{"not an object", `42`, CodeInvalidRequest, "", false, false},
	{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"get_state"}`, CodeInvalidRequest, "jsonrpc", false, true},
	{"object id", `{"jsonrpc":"2.0","id":{},"method":"get_state"}`, CodeInvalidRequest, "id", false, false},
	{"no method", `{"jsonrpc":"2.0","id":1}`, CodeInvalidRequest, "method", false, true},
	{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"frobnicate"}`, CodeMethodNotFound, "method", false, true},
	{"positional params", `{"jsonrpc":"2.0","id":1,"method":"get_state","params":[1]}`, CodeInvalidParams, "params", false, true},
	{"unknown param", `{"jsonrpc":"2.0","id":1,"method":"add_port","params":{"idd":1}}`, CodeInvalidParams, "idd", false, true},
	{"out of range", `{"jsonrpc":"2.0","id":1,"method":"add_port","params":{"id":70000}}`, CodeInvalidParams, "id", false, true},
	{"wrong type", `{"jsonrpc":"2.0","id":1,"method":"remove_subsystem","params":{"nqn":5}}`, CodeInvalidParams, "nqn", false, true},
	{"bad size", `{"jsonrpc":"2.0","id":1,"method":"add_namespace","params":{"nqn":"x","size":"lots"}}`, CodeInvalidParams, "size", false, true},
	{"negative size", `{"jsonrpc":"2.0","id":1,"method":"add_namespace","params":{"nqn":"x","size":-512}}`, CodeInvalidParams, "size", false, true},
	{"float size", `{"jsonrpc":"2.0","id":1,"method":"add_namespace","params":{"nqn":"x","size":1e9}}`, CodeInvalidParams, "size", false, true},
	{"too large", `{"jsonrpc":"2.0","id":1,"method":"get_state","params":{"x":"` + strings.Repeat("a", MaxRequest) + `"}}`,
		CodeInvalidRequest, "", true, false},
}

func TestRPCEnvelope(t *testing.T) {
	d := standIn(t)
	a := NewHandler(d, "", "test", d.log)
	const probe = `{"jsonrpc":"2.0","id":"probe","method":"get_version"}`
	for _, tc := range envelopeCases {
		t.Run(tc.name, func(t *testing.T) {
			rs := exchange(t, a, lines(hello, tc.line, probe))
			if len(rs) < 2 || rs[1].Error == nil {
				t.Fatalf("responses %+v, want an error second", rs)
			}
			e := rs[1].Error
			if e.Code != tc.code || (tc.field != "" && (e.Data == nil || e.Data.Field != tc.field)) {
				t.Fatalf("error %d %q data %+v, want code %d field %q", e.Code, e.Message, e.Data, tc.code, tc.field)
			}
			if want := map[bool]string{true: "1", false: "null"}[tc.echoesID]; string(rs[1].ID) != want {
				t.Fatalf("id %s, want %s", rs[1].ID, want)
			}
			if closed := len(rs) == 2; closed != tc.closes {
				t.Fatalf("connection closed: %v, want %v (%d responses)", closed, tc.closes, len(rs))
			}
		})
	}
}

// countingReader counts what the server read.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A too large request is refused with the limit, and the server reads no
// more of it than the limit and one buffer.
func TestRPCTooLarge(t *testing.T) {
	d := standIn(t)
	a := NewHandler(d, "", "test", d.log)
	in := &countingReader{r: io.MultiReader(strings.NewReader(hello+"\n"), strings.NewReader(strings.Repeat(" ", 64<<20)))}
	c := &memConn{in: in}
	a.ServeConn(c)
	var rs []rawResponse
	for _, l := range strings.Split(strings.TrimSpace(c.out.String()), "\n") {
		var r rawResponse
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	if len(rs) != 2 || rs[1].Error == nil || rs[1].Error.Code != CodeInvalidRequest || rs[1].Error.Data.Limit != MaxRequest {
		t.Fatalf("responses %+v", rs)
	}
	if in.n > MaxRequest+128<<10 {
		t.Fatalf("the server read %d bytes of a request over the %d-byte limit", in.n, MaxRequest)
	}
}

// Nothing but get_version is answered before the handshake; a client
// stating a version this daemon does not speak is told which it does.
func TestRPCHandshake(t *testing.T) {
	d := standIn(t)
	a := NewHandler(d, "", "test", d.log)
	rs := exchange(t, a, lines(
		`{"jsonrpc":"2.0","id":1,"method":"get_state"}`,
		`{"jsonrpc":"2.0","id":2,"method":"get_version","params":{"api_version":99}}`,
		`{"jsonrpc":"2.0","id":3,"method":"get_state"}`,
		`{"jsonrpc":"2.0","id":"four","method":"get_version","params":{"api_version":1}}`,
		`{"jsonrpc":"2.0","method":"remove_subsystem","params":{"nqn":"`+nqnB+`"}}`, // a notification: no response
		`{"jsonrpc":"2.0","id":5.5,"method":"get_state"}`,
	))
	if len(rs) != 5 {
		t.Fatalf("%d responses, want 5: %+v", len(rs), rs)
	}
	if rs[0].Error == nil || rs[0].Error.Code != CodeHandshakeRequired {
		t.Fatalf("before the handshake: %+v", rs[0])
	}
	if e := rs[1].Error; e == nil || e.Code != CodeVersionMismatch || e.Data.Field != "api_version" || len(e.Data.APIVersions) != 1 || e.Data.APIVersions[0] != APIVersion {
		t.Fatalf("unsupported version: %+v", rs[1])
	}
	if rs[2].Error == nil || rs[2].Error.Code != CodeHandshakeRequired {
		t.Fatalf("after a refused handshake: %+v", rs[2])
	}
	var v VersionResult
	if json.Unmarshal(rs[3].Result, &v); string(rs[3].ID) != `"four"` || v.Version != "test" || v.APIVersion != APIVersion {
		t.Fatalf("handshake: %+v %s", rs[3], rs[3].Result)
	}
	var st State
	if json.Unmarshal(rs[4].Result, &st); string(rs[4].ID) != "5.5" || len(st.Subsystems) != 1 || st.Subsystems[0].NQN != nqnA {
		t.Fatalf("get_state after the notification removed %s: %+v %s", nqnB, rs[4], rs[4].Result)
	}
}

// An idle connection is closed after idleTimeout.
func TestRPCIdleTimeout(t *testing.T) {
	d, dir := standIn(t), t.TempDir()
	old := IdleTimeout
	IdleTimeout = 50 * time.Millisecond // before the server starts: its goroutines read it
	cs, err := Listen(dir+"/sock", d, "", "test", d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); IdleTimeout = old }() // close waits for the readers
	c, err := net.Dial("unix", dir+"/sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: read %d, %v; want EOF", n, err)
	}
}

// A connection that is open and quiet does not hold up the shutdown.
func TestRPCCloseEndsIdleConnections(t *testing.T) {
	d, dir := standIn(t), t.TempDir()
	cs, err := Listen(dir+"/sock", d, "", "test", d.log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", dir+"/sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := NewClient(c); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { cs.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("close waited for an idle connection")
	}
}

// A request cut short by the idle timeout (no newline, the client still
// connected) is not run: the connection closes without an answer.
func TestRequestCutByIdleTimeoutIsNotRun(t *testing.T) {
	d, dir := standIn(t), t.TempDir()
	old := IdleTimeout
	IdleTimeout = 50 * time.Millisecond
	t.Cleanup(func() { IdleTimeout = old })
	a := NewHandler(d, dir+"/x.yaml", "test", d.log)
	srv, cli := net.Pipe()
	done := make(chan struct{})
	go func() { a.ServeConn(srv); srv.Close(); close(done) }()
	t.Cleanup(func() { cli.Close(); <-done })
	if _, err := cli.Write([]byte(`{"jsonrpc":"2.0","id":7,"method":"get_version"}`)); err != nil {
		t.Fatal(err)
	}
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(cli)
	if len(got) != 0 {
		t.Fatalf("answered a request cut short by the idle timeout: %q (%v)", got, err)
	}
}

// A size and a bandwidth take a byte count or a string, leave the value
// alone for null, and refuse a fraction or a bad string naming the
// parameter.
func TestByteParams(t *testing.T) {
	for _, tc := range []struct {
		in         string
		size, rate int64
		sizeErr    string
		rateErr    string
	}{
		{in: `4096`, size: 4096, rate: 4096},
		{in: `"64MiB"`, size: 64 << 20, rate: 64 << 20},
		{in: `null`, size: -1, rate: -1},
		{in: `1.5`, size: -1, rate: -1,
			sizeErr: `invalid params: size 1.5: want a byte count or a string such as "1GiB"`,
			rateErr: `invalid params: qos bandwidth 1.5: want bytes per second or a string such as "100MiB"`},
		{in: `"lots"`, size: -1, rate: -1,
			sizeErr: `invalid params: size: invalid size "lots" (want a byte count such as 4096, 512MiB or 1GiB)`,
			rateErr: `invalid params: qos: invalid rate "lots" (want bytes per second such as 100MiB or 100MiB/s)`},
	} {
		size, rate := ByteSize(-1), ByteRate(-1)
		serr := json.Unmarshal([]byte(tc.in), &size)
		rerr := json.Unmarshal([]byte(tc.in), &rate)
		checkByteParam(t, tc.in, "size", int64(size), serr, tc.size, tc.sizeErr)
		checkByteParam(t, tc.in, "qos", int64(rate), rerr, tc.rate, tc.rateErr)
	}
}

// checkByteParam checks the value v and the error err read from in: none
// if wantErr is "", else an invalid params error naming field.
func checkByteParam(t *testing.T, in, field string, v int64, err error, want int64, wantErr string) {
	t.Helper()
	if wantErr == "" {
		if err != nil || v != want {
			t.Errorf("%s %s: %d, %v; want %d", field, in, v, err, want)
		}
		return
	}
	e, ok := err.(*Error)
	if !ok || e.Code != CodeInvalidParams || e.Data == nil || e.Data.Field != field || v != want || e.Message != wantErr {
		t.Errorf("%s %s: %d, %#v; want %q on field %s", field, in, v, err, wantErr, field)
	}
}
