package ctl

import (
	"bytes"
	"flag"
	"path/filepath"
	"strings"
	"testing"
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
