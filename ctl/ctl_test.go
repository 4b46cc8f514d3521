package ctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
)

// ctlRun runs `nvmeof-tgt ctl args...` and returns its exit code, stdout and stderr.
func ctlRun(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// Every command answers -h with its usage and every flag's help, without
// a daemon.
func TestCtlHelp(t *testing.T) {
	t.Setenv("NVMEOF_TGT_SOCKET", filepath.Join(t.TempDir(), "none.sock"))
	for _, v := range verbs {
		code, out, errOut := ctlRun(append(strings.Fields(v.name), "-h")...)
		if code != 0 || !strings.HasPrefix(out, "usage: nvmeof-tgt ctl "+v.name) || !strings.Contains(out, v.about) {
			t.Fatalf("ctl %s -h: exit %d\n%s%s", v.name, code, out, errOut)
		}
		fs := flag.NewFlagSet(v.name, flag.ContinueOnError)
		v.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			_, usage := flag.UnquoteUsage(f)
			if usage == "" || !strings.Contains(out, "-"+f.Name) || !strings.Contains(out, usage) {
				t.Errorf("ctl %s -h: flag -%s has no help, or it is not shown:\n%s", v.name, f.Name, out)
			}
		})
	}
	if code, out, _ := ctlRun("-h"); code != 0 || !strings.Contains(out, "add namespace NQN") {
		t.Fatalf("ctl -h: %d\n%s", code, out)
	}
}

// Usage errors are found before any daemon is asked (that would exit 1:
// there is none), and exit 2.
var ctlUsageErrors = []struct {
	args []string
	want string
}{
	{nil, "usage: nvmeof-tgt ctl"},
	{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	{[]string{"add"}, "add what?"},
	{[]string{"add", "port", "-id", "70000"}, "want a number from 0 to 65535"},
	{[]string{"add", "namespace", "-backend", "nullblk"}, "add namespace takes 1 arguments, got 0"},
	{[]string{"add", "namespace", "x", "-size", "lots"}, "invalid size"},
	{[]string{"set", "subsystem", "x", "-allow-any-host=maybe"}, "invalid boolean"},
	{[]string{"remove", "namespace", "x", "one"}, `NSID "one"`},
	{[]string{"save"}, "save takes 1 arguments"},
	{[]string{"-bogus", "list"}, "flag provided but not defined: -bogus"},
	{[]string{"add", "port", "-address", "10.0.0.1"}, "add port needs -id"},
	{[]string{"add", "port"}, "add port needs -address and -id"},
	{[]string{"add", "namespace", "x"}, "add namespace needs -backend"},
	{[]string{"set", "namespace", "x", "1"}, "set namespace: nothing to set"},
	{[]string{"set", "subsystem", "x"}, "set subsystem: nothing to set"},
	{[]string{"set", "ana", "1", "2", "standby"}, `ANA state "standby": want one of optimized, non_optimized`},
	{[]string{"set", "ana", "1", "two", "optimized"}, `ANA group "two"`},
	{[]string{"set", "ana", "1", "2"}, "set ana takes 3 arguments, got 2"},
}

func TestCtlUsageErrors(t *testing.T) {
	t.Setenv("NVMEOF_TGT_SOCKET", filepath.Join(t.TempDir(), "none.sock"))
	for _, tc := range ctlUsageErrors {
		code, _, errOut := ctlRun(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("ctl %v: exit %d, want 2 with %q:\n%s", tc.args, code, tc.want, errOut)
		}
	}
}

// ctl's usage lists every command of the table with its arguments and
// every flag it takes: it is made from the table, so none is left out.
func TestUsageListsEveryCommandAndFlag(t *testing.T) {
	u := usage()
	for _, v := range verbs {
		if !strings.Contains(u, "  "+strings.Join(append([]string{v.name}, v.args...), " ")+" ") {
			t.Errorf("usage lacks %s %v:\n%s", v.name, v.args, u)
		}
		fs := flag.NewFlagSet(v.name, flag.ContinueOnError)
		v.flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(u, "-"+f.Name+" ") && !strings.Contains(u, "-"+f.Name+"]") {
				t.Errorf("usage lacks %s's -%s:\n%s", v.name, f.Name, u)
			}
		})
	}
}

// add port's -transport, -ana and -referral reach add_port's parameters.
func TestAddPortFlags(t *testing.T) {
	cmd, err := Parse([]string{"add", "port", "-id", "3", "-transport", "tcp", "-address", "10.0.0.1", "-port", "4430",
		"-ana", "7=non_optimized", "-referral", "rdma://[fd00::2]:4421", "-referral", "10.0.0.3"})
	if err != nil {
		t.Fatal(err)
	}
	p := cmd.Params.(api.PortParams)
	want := []api.Referral{{Transport: "rdma", Address: "fd00::2", Port: 4421}, {Address: "10.0.0.3"}}
	if cmd.Method != "add_port" || p.Transport != "tcp" || *p.Port != 4430 || p.ANA[7] != "non_optimized" || !slices.Equal(p.Referrals, want) {
		t.Fatalf("add port: %s %+v", cmd.Method, p)
	}
	for _, bad := range [][]string{{"-ana", "0=inaccessible"}, {"-ana", "inaccessible"}, {"-ana", "2=standby"}, {"-referral", "tcp://10.0.0.2:99999"}, {"-referral", "tcp://"}} {
		if _, err := Parse(append([]string{"add", "port", "-id", "3", "-address", "10.0.0.1"}, bad...)); err == nil {
			t.Errorf("add port %v: accepted", bad)
		}
	}
}

// save FILE refuses a result with redacted secrets and writes nothing:
// the file would not start the daemon.
func TestSaveRefusesRedactedSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "saved.yaml")
	raw, _ := json.Marshal(api.SaveResult{YAML: "ports: []\n", Redacted: 1, Note: "1 inline DH-HMAC-CHAP secret(s) written as <redacted>"})
	if err := showSave(path)(raw, io.Discard); err == nil || !strings.Contains(err.Error(), "not writing") {
		t.Fatalf("save with a redacted secret: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused save left %s: %v", path, err)
	}
	var out strings.Builder
	if err := showSave("-")(raw, &out); err != nil || out.String() != "ports: []\n" {
		t.Fatalf("save - with a redacted secret: %q %v", out.String(), err)
	}
}

// ctl list names each port's and referral's transport.
func TestListShowsTransports(t *testing.T) {
	raw, _ := json.Marshal(api.State{Ports: []api.PortState{
		{ID: 1, Transport: "rdma", Address: "10.0.0.1", Port: 4420},
		{ID: 3, Transport: "tcp", Address: "10.0.0.1", Port: 4430, Referrals: []api.Referral{{Transport: "rdma", Address: "10.0.0.1", Port: 4421}, {Address: "10.0.0.2", Port: 4420}}},
	}})
	var out strings.Builder
	if err := ShowState(raw, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"port 1  rdma 10.0.0.1:4420\n", "port 3  tcp 10.0.0.1:4430\n", "referral  rdma 10.0.0.1:4421\n", "referral  rdma 10.0.0.2:4420\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ctl list lacks %q:\n%s", want, out.String())
		}
	}
}
