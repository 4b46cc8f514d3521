package daemon

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/ctl"
)

// ctlList is what `ctl list` prints of st.
func ctlList(t *testing.T, st api.State) string {
	t.Helper()
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return ctlListRaw(t, raw)
}

// ctlListRaw is what `ctl list` prints of get_state's result raw.
func ctlListRaw(t *testing.T, raw []byte) string {
	t.Helper()
	var out strings.Builder
	if err := ctl.ShowState(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// control runs one ctl command line (after `ctl`) against d in process,
// through the API over an in-memory connection.
func control(d *Daemon, cfgPath string, args []string, out io.Writer) error {
	cmd, err := ctl.Parse(args)
	if err != nil {
		return err
	}
	srv, cli := net.Pipe()
	done := make(chan struct{})
	go func() { api.NewHandler(d, cfgPath, Version, d.log).ServeConn(srv); srv.Close(); close(done) }()
	defer func() { cli.Close(); <-done }()
	c, err := api.NewClient(cli)
	if err != nil {
		return err
	}
	return cmd.Run(c, out)
}

// ctlRun runs `nvmeof-tgt ctl args...` and returns its exit code, stdout and stderr.
func ctlRun(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := ctl.Run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// ctlSteps run in order through the admin socket; the -socket spelling
// varies. want is in stdout (code 0) or stderr.
var ctlSteps = []struct {
	args []string
	code int
	want string
}{
	{[]string{"-socket=SOCK", "add", "port", "-id", "2", "-address", "10.0.0.2", "-port=4430"}, 0, ""},
	{[]string{"-socket", "SOCK", "add", "subsystem", nqnC, "-port", "2", "-host", hostX, "-cntlid-min", "1000", "-cntlid-max", "1999"}, 0, ""},
	{[]string{"-socket=SOCK", "list"}, 0, "ports [2], controller IDs 1000..1999"},
	{[]string{"--socket=SOCK", "add", "namespace", nqnC, "-backend", "nullblk", "-size", "64MiB", "-block-size", "4096"}, 0, ""},
	{[]string{"-socket=SOCK", "add", "namespace", nqnC, "-backend", "file"}, 1, "subsystems[2].namespaces[1].path: required"},
	{[]string{"-socket=SOCK", "remove", "subsystem", "nqn.2026-11.io.example:none"}, 1, "no subsystem nqn.2026-11.io.example:none"},
	{[]string{"-socket=SOCK", "set", "subsystem", nqnC, "-allow-any-host"}, 0, ""},
	{[]string{"-socket=SOCK", "set", "subsystem", nqnC, "-cntlid-min", "2000", "-cntlid-max", "2999"}, 0, ""},
	{[]string{"-socket=SOCK", "set", "subsystem", nqnC, "-cntlid-max", "99"}, 1, "subsystems[2].cntlid_min: controller ID range 2000..99 is not within 1..65519"},
	{[]string{"-socket=SOCK", "set", "subsystem", nqnC, "-cntlid-min", "x"}, 2, "want a number from 1 to 65519"},
	{[]string{"-socket=SOCK", "set", "namespace", nqnC, "1", "-size", "128MiB"}, 0, ""},
	{[]string{"-socket=SOCK", "set", "namespace", nqnC, "1", "-reservations=false"}, 0, ""},
	{[]string{"-socket=SOCK", "list"}, 0, "ANA group 1, reservations off"},
	{[]string{"-socket=SOCK", "set", "namespace", nqnC, "1", "-reservations=maybe"}, 2, "want true or false"},
	{[]string{"-socket=SOCK", "set", "namespace", nqnC, "1", "-reservations"}, 0, ""},
	{[]string{"-socket=SOCK", "set", "ana", "1", "2", "inaccessible"}, 0, ""},
	{[]string{"-socket=SOCK", "set", "ana", "9", "2", "inaccessible"}, 1, "no port 9"},
	{[]string{"-socket=SOCK", "set", "namespace", nqnB, "1", "-ana-group", "2"}, 0, ""},
	{[]string{"-socket=SOCK", "list"}, 0, "  ANA group 2  inaccessible"},
	{[]string{"-socket=SOCK", "add", "host", nqnC, hostY}, 0, ""},
	{[]string{"-socket=SOCK", "remove", "host", nqnC, hostY}, 0, ""},
	{[]string{"-socket=SOCK", "remove", "namespace", nqnA, "1"}, 0, ""},
	{[]string{"-socket=SOCK", "list"}, 0, "128MiB, 4096-byte blocks"},
	{[]string{"-socket=SOCK", "save", "-"}, 0, "nqn: " + nqnC},
	{[]string{"-socket=SOCK", "save", "DIR/saved.yaml"}, 0, "saved the running configuration to DIR/saved.yaml"},
	{[]string{"-socket=SOCK", "reload"}, 1, "no such file"},
	{[]string{"-socket=DIR/none.sock", "list"}, 1, "no daemon answers at DIR/none.sock"},
}

// ctl against a daemon's real admin socket, as users and scripts run it.
func TestCtlRoundTrip(t *testing.T) {
	_, dir, d := startBase(t)
	sock := filepath.Join(dir, "api.sock")
	cs, err := api.Listen(sock, d, filepath.Join(dir, "missing.yaml"), Version, d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, s := range ctlSteps {
		args := make([]string, len(s.args))
		for i, a := range s.args {
			args[i] = strings.ReplaceAll(strings.ReplaceAll(a, "SOCK", sock), "DIR", dir)
		}
		code, out, errOut := ctlRun(args...)
		got := out
		if s.code != 0 {
			got = errOut
		}
		want := strings.ReplaceAll(s.want, "DIR", dir)
		if code != s.code || !strings.Contains(got, want) {
			t.Fatalf("ctl %v: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", args, code, s.code, want, out, errOut)
		}
	}
	if _, err := config.Load(filepath.Join(dir, "saved.yaml")); err != nil {
		t.Fatalf("ctl save wrote a file that does not load: %v", err)
	}
	t.Setenv("NVMEOF_TGT_SOCKET", sock)
	checkListJSON(t)
}

// checkListJSON: `ctl list -json` keeps the shape scripts parse.
func checkListJSON(t *testing.T) {
	code, out, errOut := ctlRun("list", "-json")
	if code != 0 {
		t.Fatalf("ctl list -json: %d %s", code, errOut)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("ctl list -json: %v\n%s", err, out)
	}
	ports, _ := st["ports"].([]any)
	subs, _ := st["subsystems"].([]any)
	if _, ok := st["generation"].(float64); !ok || len(ports) != 2 || len(subs) != 3 {
		t.Fatalf("ctl list -json: %s", out)
	}
	c := subs[2].(map[string]any)
	for _, k := range []string{"nqn", "serial", "model", "allow_any_host", "hosts", "ports", "namespaces", "controllers"} {
		if _, ok := c[k]; !ok {
			t.Fatalf("subsystem lacks %q: %v", k, c)
		}
	}
	if !strings.HasPrefix(out, "{\n  \"generation\": ") {
		t.Fatalf("ctl list -json is not indented as before:\n%s", out)
	}
}
