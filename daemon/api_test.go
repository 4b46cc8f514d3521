package daemon

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// pipeClient connects a client to a over an in-memory connection, past
// the handshake.
// apiControl is the command's Control: the management API on the
// configuration's socket, cfgPath the file it reloads.
func apiControl(cfg *config.Config, cfgPath string) Control {
	return func(d *Daemon) (func(), error) {
		cs, err := api.Listen(cfg.Control.Socket, d, cfgPath, Version, d.log)
		if err != nil {
			return nil, err
		}
		return cs.Close, nil
	}
}

// releaseGroup is release_ana_group of the ANA group on d.
func releaseGroup(t *testing.T, d *Daemon, group uint32) (api.GatewayResult, error) {
	var r api.GatewayResult
	err := pipeClient(t, api.NewHandler(d, "", Version, d.log)).Call("release_ana_group", api.GatewayParams{Group: group}, &r)
	return r, err
}

func pipeClient(t *testing.T, a *api.Handler) *api.Client {
	t.Helper()
	srv, cli := net.Pipe()
	done := make(chan struct{})
	go func() { a.ServeConn(srv); srv.Close(); close(done) }()
	t.Cleanup(func() { cli.Close(); <-done })
	c, err := api.NewClient(cli)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	nqnC  = "nqn.2026-11.io.example:c"
	hostX = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000aa"
	hostY = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000bb"
)

// apiStep is one call and what it must give: code 0 for success, else the
// error code, data.field and data.param.
type apiStep struct {
	method       string
	params       string // JSON; DIR stands for the test's directory
	code         int
	field, param string
}

// apiSteps run in order on startBase's daemon (ports[0] is port 1;
// subsystems a (nullblk) and b (a 16 MiB file) come first). Port 4 cannot listen.
var apiSteps = []apiStep{
	{"add_port", `{"id":2,"address":"10.0.0.2","port":4430}`, 0, "", ""},
	{"add_port", `{"id":2,"address":"10.0.0.3"}`, api.CodeAlreadyExists, "id", ""},
	{"add_port", `{"id":3,"address":"ten"}`, api.CodeValidationFailed, "ports[2].address", "address"},
	{"add_port", `{"id":4,"address":"10.0.0.4"}`, api.CodeNotApplied, "ports[2]", ""},
	{"remove_port", `{"id":9}`, api.CodeNotFound, "id", ""},
	{"add_subsystem", `{"nqn":"` + nqnC + `","hosts":["` + hostX + `"],"ports":[2]}`, 0, "", ""},
	{"add_subsystem", `{"nqn":"` + nqnC + `","allow_any_host":true}`, api.CodeAlreadyExists, "nqn", ""},
	{"add_subsystem", `{"nqn":"nqn.2026-11.io.example:d","allow_any_host":true,"serial":"123456789012345678901"}`,
		api.CodeValidationFailed, "subsystems[3].serial", "serial"},
	{"remove_port", `{"id":2}`, api.CodeInUse, "id", ""}, // c would be served on every port
	{"set_subsystem", `{"nqn":"` + nqnC + `","allow_any_host":true,"ports":[]}`, 0, "", ""},
	{"set_subsystem", `{"nqn":"` + nqnC + `"}`, api.CodeInvalidParams, "params", ""},
	{"set_subsystem", `{"nqn":"nqn.2026-11.io.example:none","allow_any_host":true}`, api.CodeNotFound, "nqn", ""},
	{"set_subsystem", `{"nqn":"` + nqnC + `","max_io_queues":-1}`, api.CodeValidationFailed, "subsystems[2].max_io_queues", "max_io_queues"},
	{"set_subsystem", `{"nqn":"` + nqnC + `","cntlid_min":1000,"cntlid_max":1999}`, 0, "", ""},
	{"set_subsystem", `{"nqn":"` + nqnC + `","cntlid_min":2000}`, api.CodeValidationFailed, "subsystems[2].cntlid_min", "cntlid_min"},
	{"add_subsystem", `{"nqn":"nqn.2026-11.io.example:d","allow_any_host":true,"cntlid_max":65520}`,
		api.CodeValidationFailed, "subsystems[3].cntlid_min", "cntlid_min"},
	{"remove_port", `{"id":2}`, 0, "", ""},
	{"add_namespace", `{"nqn":"` + nqnC + `","backend":"nullblk","size":"64MiB"}`, 0, "", ""},
	{"add_namespace", `{"nqn":"` + nqnC + `","nsid":1,"backend":"nullblk","size":1048576}`, api.CodeAlreadyExists, "nsid", ""},
	{"add_namespace", `{"nqn":"` + nqnC + `","backend":"file"}`, api.CodeValidationFailed, "subsystems[2].namespaces[1].path", "path"},
	{"add_namespace", `{"nqn":"` + nqnC + `","backend":"block","path":"DIR/no-such-disk"}`, api.CodeNotApplied, "subsystems[2].namespaces[1]", ""},
	{"add_namespace", `{"nqn":"nqn.2026-11.io.example:none","backend":"nullblk","size":512}`, api.CodeNotFound, "nqn", ""},
	{"add_namespace", `{"nqn":"` + nqnC + `","nsid":3,"backend":"file","path":"DIR/c3.img","size":"8MiB","uuid":"91fdba0d-f87b-4c25-b80f-db7be1418b9e"}`, 0, "", ""},
	{"set_namespace", `{"nqn":"` + nqnC + `","nsid":1,"size":"128MiB"}`, 0, "", ""},
	{"set_namespace", `{"nqn":"` + nqnC + `","nsid":9,"size":512}`, api.CodeNotFound, "nsid", ""},
	{"set_namespace", `{"nqn":"` + nqnC + `","nsid":1}`, api.CodeInvalidParams, "size", ""},
	{"set_namespace", `{"nqn":"` + nqnB + `","nsid":1,"size":"8MiB"}`, api.CodeAppliedInPart, "subsystems[1].namespaces[0].size", "size"},
	{"remove_namespace", `{"nqn":"` + nqnC + `","nsid":1}`, 0, "", ""},
	{"remove_namespace", `{"nqn":"` + nqnC + `","nsid":1}`, api.CodeNotFound, "nsid", ""},
	{"remove_namespace", `{"nqn":"` + nqnC + `"}`, api.CodeInvalidParams, "nsid", ""},
	{"add_host", `{"nqn":"` + nqnC + `","host":"` + hostY + `"}`, 0, "", ""},
	{"add_host", `{"nqn":"` + nqnC + `","host":"` + hostY + `"}`, api.CodeAlreadyExists, "host", ""},
	{"add_host", `{"nqn":"` + nqnC + `","host":"bad host"}`, api.CodeValidationFailed, "subsystems[2].hosts[2]", ""},
	{"remove_host", `{"nqn":"` + nqnC + `","host":"` + hostX + `"}`, 0, "", ""},
	{"remove_host", `{"nqn":"` + nqnC + `","host":"` + hostX + `"}`, api.CodeNotFound, "host", ""},
	{"set_ana_state", `{"port":1,"group":2,"state":"non_optimized"}`, 0, "", ""},
	{"set_ana_state", `{"port":1,"group":3,"state":"change"}`, 0, "", ""},
	{"set_ana_state", `{"port":1,"group":3,"state":"optimized"}`, 0, "", ""},
	{"set_ana_state", `{"port":9,"group":2,"state":"inaccessible"}`, api.CodeNotFound, "port", ""},
	{"set_ana_state", `{"port":1,"group":0,"state":"inaccessible"}`, api.CodeInvalidParams, "group", ""},
	{"set_ana_state", `{"port":1,"group":2,"state":"standby"}`, api.CodeInvalidParams, "state", ""},
	{"set_namespace", `{"nqn":"` + nqnB + `","nsid":1,"ana_group":2}`, 0, "", ""},
	{"set_namespace", `{"nqn":"` + nqnB + `","nsid":1,"ana_group":200}`, api.CodeValidationFailed, "subsystems[1].namespaces[0].ana_group", "ana_group"},
	{"remove_subsystem", `{}`, api.CodeInvalidParams, "nqn", ""},
	{"remove_subsystem", `{"nqn":"nqn.2026-11.io.example:none"}`, api.CodeNotFound, "nqn", ""},
	{"remove_subsystem", `{"nqn":"` + nqnA + `"}`, 0, "", ""},
	{"save_config", `{"path":"relative.yaml"}`, api.CodeInvalidParams, "path", ""},
	{"save_config", `{"path":"DIR/no-such-dir/saved.yaml"}`, api.CodeNotApplied, "path", ""},
	{"save_config", `{"path":"DIR/saved.yaml"}`, 0, "", ""},
}

// Every method, its success and each of its error codes, on a daemon
// over the fake transport; then the state and the saved file show what
// the successful calls did.
func TestAPIMethods(t *testing.T) {
	rdma, dir, d := startBase(t)
	rdma.refuse[4] = true
	c := pipeClient(t, api.NewHandler(d, "", Version, d.log))
	for i, s := range apiSteps {
		params := json.RawMessage(strings.ReplaceAll(s.params, "DIR", dir))
		var result json.RawMessage
		err := c.Call(s.method, params, &result)
		var re *api.Error
		switch {
		case s.code == 0 && err != nil:
			t.Fatalf("step %d %s %s: %v", i, s.method, params, err)
		case s.code == 0:
			continue
		case !errors.As(err, &re):
			t.Fatalf("step %d %s %s: %v, want error %d", i, s.method, params, err, s.code)
		case re.Code != s.code || (s.field != "" && re.Data.Field != s.field) || (s.field != "" && re.Data.Param != s.param):
			t.Fatalf("step %d %s %s: error %d %q %+v, want %d field %q param %q", i, s.method, params, re.Code, re.Message, re.Data, s.code, s.field, s.param)
		}
	}
	checkAPIResult(t, c, dir)
}

func checkAPIResult(t *testing.T, c *api.Client, dir string) {
	var st api.State
	if err := c.Call("get_state", nil, &st); err != nil {
		t.Fatal(err)
	}
	var nqns []string
	for _, s := range st.Subsystems {
		nqns = append(nqns, s.NQN)
	}
	if len(st.Ports) != 1 || !slices.Equal(nqns, []string{nqnB, nqnC}) {
		t.Fatalf("ports %+v, subsystems %v", st.Ports, nqns)
	}
	sc := st.Subsystems[1]
	if len(sc.Namespaces) != 1 || sc.Namespaces[0].NSID != 3 || sc.Namespaces[0].UUID != "91fdba0d-f87b-4c25-b80f-db7be1418b9e" ||
		!slices.Equal(sc.Hosts, []string{hostY}) || !sc.AllowAnyHost || len(sc.Ports) != 0 || sc.CntlidMin != 1000 || sc.CntlidMax != 1999 {
		t.Fatalf("subsystem c: %+v", sc)
	}
	if sb := st.Subsystems[0]; sb.Namespaces[0].SizeBytes != 16<<20 || sb.Namespaces[0].ANAGroup != 2 {
		t.Fatalf("the refused shrink changed b's namespace, or it is not in ANA group 2: %+v", sb.Namespaces[0])
	}
	if ana := st.Ports[0].ANA; len(ana) != 1 || ana[2] != config.ANANonOptimized {
		t.Fatalf("port 1 ANA states %v, want group 2 non_optimized only", ana)
	}
	var saved api.SaveResult
	if err := c.Call("save_config", nil, &saved); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(dir, "saved.yaml"))
	if err != nil || string(file) != saved.YAML {
		t.Fatalf("saved file (%v) differs from save_config's YAML", err)
	}
	if _, err := config.Parse(file); err != nil {
		t.Fatalf("the saved configuration does not load: %v", err)
	}
}

// The added namespace's NSID is returned, also when the daemon chose it;
// changes return the generation they made.
func TestAPIChangeResult(t *testing.T) {
	_, _, d := startBase(t)
	c := pipeClient(t, api.NewHandler(d, "", Version, d.log))
	var r api.ChangeResult
	if err := c.Call("add_namespace", api.NamespaceParams{NQN: nqnA, Backend: "nullblk", Size: 1 << 20}, &r); err != nil {
		t.Fatal(err)
	}
	if gen, _, _ := d.Generation(); r.NSID != 2 || r.Generation != gen || gen != 2 {
		t.Fatalf("result %+v, daemon generation %d", r, gen)
	}
}

// reload reads the daemon's file: a broken one is refused with its fields
// and changes nothing; a good one is applied.
func TestAPIReload(t *testing.T) {
	_, dir, d := startBase(t)
	path := filepath.Join(dir, "tgt.yaml")
	c := pipeClient(t, api.NewHandler(d, path, Version, d.log))
	os.WriteFile(path, []byte(baseConfig(dir, "")+"\n  - {nqn: "+nqnC+", allow_any_host: true, namespaces: [{nsid: 1, backend: flie}]}\n"), 0o600)
	var re *api.Error
	err := c.Call("reload", nil, nil)
	if !errors.As(err, &re) || re.Code != api.CodeValidationFailed || re.Data.Field != "subsystems[2].namespaces[0].backend" {
		t.Fatalf("reload of a broken file: %v %+v", err, re)
	}
	if d.target.Subsystem(nqnC) != nil {
		t.Fatal("a refused reload changed the target")
	}
	os.WriteFile(path, []byte(baseConfig(dir, "")+"\n  - {nqn: "+nqnC+", allow_any_host: true, namespaces: [{nsid: 1, backend: nullblk, size: 1MiB}]}\n"), 0o600)
	var r api.ReloadResult
	if err := c.Call("reload", nil, &r); err != nil {
		t.Fatal(err)
	}
	if r.File != path || r.Generation != 2 || d.target.Subsystem(nqnC) == nil {
		t.Fatalf("reload: %+v", r)
	}
}

// An explicit inline_data_size of 0 turns in-capsule data off, and stays
// off in the saved configuration (defaults would make it 8192).
func TestAPIAddPortWithoutInlineData(t *testing.T) {
	_, _, d := startBase(t)
	c := pipeClient(t, api.NewHandler(d, "", Version, d.log))
	if err := c.Call("add_port", json.RawMessage(`{"id":2,"address":"10.0.0.2","port":4430,"inline_data_size":0}`), &json.RawMessage{}); err != nil {
		t.Fatal(err)
	}
	var saved api.SaveResult
	if err := c.Call("save_config", nil, &saved); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(saved.YAML))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cfg.Ports, func(p config.Port) bool { return p.ID == 2 })
	if i < 0 || cfg.Ports[i].InlineDataSize != 0 {
		t.Fatalf("port 2 after save and load: %+v", cfg.Ports)
	}
}

// A reload holds the daemon's edit lock from reading the file to applying
// it, as an admin API change does (api's TestChangeHoldsTheEditLock), so
// neither can undo the other. It is caught where it listens on the port
// its file adds.
func TestReloadHoldsTheEditLock(t *testing.T) {
	_, dir, d := startBase(t)
	cfgPath := filepath.Join(dir, "tgt.yaml")
	held := func(during string) {
		if d.edits.TryLock() {
			d.edits.Unlock()
			t.Errorf("the edit lock is free during %s", during)
		}
	}
	file := strings.Replace(baseConfig(dir, ""), "ports: [{id: 1, address: 10.0.0.1}]",
		"ports: [{id: 1, address: 10.0.0.1}, {id: 2, address: 10.0.0.1, port: 4421}]", 1)
	if err := os.WriteFile(cfgPath, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	prev := listen
	listen = func(tg *fabrics.Target, p *fabrics.Port, log *logrus.Entry) (portListener, error) {
		held("a reload")
		return prev(tg, p, log)
	}
	if err := d.Reload(cfgPath); err != nil {
		t.Fatal(err)
	}
}
