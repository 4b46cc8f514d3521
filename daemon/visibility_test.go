package daemon

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/ctl"
)

// wantHosts checks who the running target shows namespace nsid of nqn to:
// limited false means every allowed host.
func wantHosts(t *testing.T, d *Daemon, nqn string, nsid uint32, limited bool, hosts ...string) {
	t.Helper()
	got, ok := d.target.Subsystem(nqn).NamespaceHosts(nsid)
	if ok != limited || !slices.Equal(got, hosts) {
		t.Fatalf("namespace %d of %s: limited %v to %v, want limited %v to %v", nsid, nqn, ok, got, limited, hosts)
	}
}

// The API edits a namespace's hosts in place, through the same
// validation as a file; errors name the field.
func TestNamespaceHostsAPI(t *testing.T) {
	_, _, d := startBase(t)
	c := pipeClient(t, api.NewHandler(d, "", Version, d.log))
	ref := func(nsid uint32, host string) string {
		return `{"nqn":"` + nqnA + `","nsid":` + string(rune('0'+nsid)) + `,"host":"` + host + `"}`
	}
	steps := []apiStep{
		{"add_namespace", `{"nqn":"` + nqnA + `","nsid":2,"backend":"nullblk","size":"1MiB","hosts":[]}`, 0, "", ""},
		{"add_namespace_host", ref(2, hostX), 0, "", ""},
		{"add_namespace_host", ref(2, hostX), api.CodeAlreadyExists, "host", ""},
		{"add_namespace_host", ref(1, hostX), api.CodeAlreadyExists, "host", ""}, // every host sees it already
		{"remove_namespace_host", ref(1, hostX), api.CodeNotFound, "host", ""},
		{"remove_namespace_host", ref(2, hostY), api.CodeNotFound, "host", ""},
		{"add_namespace_host", ref(9, hostY), api.CodeNotFound, "nsid", ""},
		{"add_namespace_host", `{"nqn":"` + nqnA + `","nsid":2}`, api.CodeInvalidParams, "host", ""},
		{"add_namespace_host", ref(2, "bad host"), api.CodeValidationFailed, "subsystems[0].namespaces[1].hosts[1]", ""},
		{"add_subsystem", `{"nqn":"` + nqnC + `","hosts":["` + hostX + `"]}`, 0, "", ""},
		{"add_namespace", `{"nqn":"` + nqnC + `","backend":"nullblk","size":"1MiB","hosts":["` + hostY + `"]}`,
			api.CodeValidationFailed, "subsystems[2].namespaces[0].hosts[0]", "hosts[0]"},
		{"add_namespace", `{"nqn":"` + nqnC + `","backend":"nullblk","size":"1MiB","hosts":["` + hostX + `"]}`, 0, "", ""},
		// The host a namespace names cannot leave the subsystem first.
		{"add_host", `{"nqn":"` + nqnC + `","host":"` + hostY + `"}`, 0, "", ""},
		{"remove_host", `{"nqn":"` + nqnC + `","host":"` + hostX + `"}`, api.CodeValidationFailed, "subsystems[2].namespaces[0].hosts[0]", ""},
	}
	ns2 := func() any { return d.target.Subsystem(nqnA).Namespace(2) }
	var before any
	for i, s := range steps {
		callStepExactly(t, c, i, s)
		if i == 0 {
			wantHosts(t, d, nqnA, 2, true)
			before = ns2()
		}
		if i == 1 {
			wantHosts(t, d, nqnA, 2, true, hostX)
		}
	}
	if ns2() != before {
		t.Fatal("namespace 2 was replaced: a change of hosts must apply in place")
	}
	if err := c.Call("set_namespace", map[string]any{"nqn": nqnA, "nsid": 2, "hosts": []string{hostY, hostX}}, new(json.RawMessage)); err != nil {
		t.Fatal(err)
	}
	wantHosts(t, d, nqnA, 2, true, hostX, hostY)
	for _, h := range []string{hostX, hostY} {
		if err := c.Call("remove_namespace_host", map[string]any{"nqn": nqnA, "nsid": 2, "host": h}, new(json.RawMessage)); err != nil {
			t.Fatal(err)
		}
	}
	// Without its last host the namespace is hidden from all, not shown
	// to all; get_state and a saved file say so.
	checkHiddenFromAll(t, d, c)
	if ns2() != before {
		t.Fatal("reloading the saved configuration replaced namespace 2")
	}
}

// callStepExactly makes step i's call and checks its outcome: success,
// or the error with exactly its code, data.field and data.param.
func callStepExactly(t *testing.T, c *api.Client, i int, s apiStep) {
	t.Helper()
	var result json.RawMessage
	err := c.Call(s.method, json.RawMessage(s.params), &result)
	var re *api.Error
	switch {
	case s.code == 0 && err != nil:
		t.Fatalf("step %d %s %s: %v", i, s.method, s.params, err)
	case s.code == 0:
	case !errors.As(err, &re):
		t.Fatalf("step %d %s %s: %v, want error %d", i, s.method, s.params, err, s.code)
	case re.Code != s.code || re.Data.Field != s.field || re.Data.Param != s.param:
		t.Fatalf("step %d %s %s: error %d %q %+v, want %d field %q param %q", i, s.method, s.params, re.Code, re.Message, re.Data, s.code, s.field, s.param)
	}
}

// checkHiddenFromAll checks that namespace 2 of a, whose hosts were all
// removed, is hidden from every host, that get_state shows it with an
// empty list (and namespace 1 with none), and that the saved
// configuration applies to the same.
func checkHiddenFromAll(t *testing.T, d *Daemon, c *api.Client) {
	t.Helper()
	wantHosts(t, d, nqnA, 2, true)
	var st api.State
	if err := c.Call("get_state", nil, &st); err != nil {
		t.Fatal(err)
	}
	if h := st.Subsystems[0].Namespaces[1].Hosts; h == nil || len(*h) != 0 || st.Subsystems[0].Namespaces[0].Hosts != nil {
		t.Fatalf("get_state hosts: namespace 1 %v, namespace 2 %v", st.Subsystems[0].Namespaces[0].Hosts, h)
	}
	var saved struct{ YAML string }
	if err := c.Call("save_config", nil, &saved); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(parse(t, saved.YAML)); err != nil {
		t.Fatal(err)
	}
	wantHosts(t, d, nqnA, 2, true)
}

// A reload that changes only a namespace's hosts keeps the namespace and
// shows or hides it in place; an added namespace is limited before hosts
// can see it.
func TestReloadChangesNamespaceHostsInPlace(t *testing.T) {
	_, dir, d := startBase(t)
	ns := d.target.Subsystem(nqnA).Namespace(1)
	limited := strings.Replace(baseConfig(dir, ""), "{nsid: 1, backend: nullblk, size: 64MiB}",
		"{nsid: 1, backend: nullblk, size: 64MiB, hosts: ["+hostX+"]}\n      - {nsid: 2, backend: nullblk, size: 1MiB, hosts: []}", 1)
	if err := d.Apply(parse(t, limited)); err != nil {
		t.Fatal(err)
	}
	if d.target.Subsystem(nqnA).Namespace(1) != ns {
		t.Fatal("namespace 1 was replaced")
	}
	wantHosts(t, d, nqnA, 1, true, hostX)
	wantHosts(t, d, nqnA, 2, true)
	if run := d.Running(); !run.Subsystems[0].Namespaces[0].Limited() || !slices.Equal(run.Subsystems[0].Namespaces[0].VisibleTo(), []string{hostX}) {
		t.Fatalf("running configuration: %+v", run.Subsystems[0].Namespaces[0])
	}
	if err := d.Apply(parse(t, baseConfig(dir, ""))); err != nil {
		t.Fatal(err)
	}
	wantHosts(t, d, nqnA, 1, false)
	wantHosts(t, d, nqnA, 2, false) // removed: its limit went with it
	if d.target.Subsystem(nqnA).Namespace(1) != ns {
		t.Fatal("namespace 1 was replaced when its limit was lifted")
	}
}

func TestCtlNamespaceHosts(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		method string
		want   any
	}{
		{[]string{"add", "namespace-host", nqnA, "2", hostX}, "add_namespace_host", api.NamespaceHostParams{NQN: nqnA, NSID: 2, Host: hostX}},
		{[]string{"remove", "namespace-host", nqnA, "2", hostX}, "remove_namespace_host", api.NamespaceHostParams{NQN: nqnA, NSID: 2, Host: hostX}},
	} {
		cmd, err := ctl.Parse(tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cmd.Method != tc.method || cmd.Params != tc.want {
			t.Fatalf("%v: %s %+v, want %s %+v", tc.args, cmd.Method, cmd.Params, tc.method, tc.want)
		}
	}
	for _, tc := range []struct {
		flag string
		want *[]string
	}{{"-hosts=", &[]string{}}, {"-hosts=" + hostX + "," + hostY, &[]string{hostX, hostY}}, {"", nil}} {
		args := []string{"add", "namespace", nqnA, "-backend", "nullblk", "-size", "1MiB"}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		cmd, err := ctl.Parse(args)
		if err != nil {
			t.Fatal(err)
		}
		got := cmd.Params.(api.NamespaceParams).Hosts
		if !config.SameHosts(got, tc.want) {
			t.Errorf("ctl add namespace %q: hosts %v, want %v", tc.flag, got, tc.want)
		}
		set, err := ctl.Parse([]string{"set", "namespace", nqnA, "1", "-hosts=" + hostX})
		if err != nil {
			t.Fatal(err)
		}
		if h := set.Params.(api.NamespaceSet).Hosts; h == nil || !slices.Equal(*h, []string{hostX}) {
			t.Errorf("ctl set namespace -hosts: %v", h)
		}
	}
}
