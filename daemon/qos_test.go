package daemon

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/ctl"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/metrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/metrics/metricstest"
)

// QoS limits change live through set_namespace (as ctl sends it) and a
// reload: the namespace stays, with its hosts, and get_state, ctl list and
// the metrics show the limits the target enforces.
func TestQoSLive(t *testing.T) {
	_, dir, d := startBase(t)
	path := filepath.Join(dir, "tgt.yaml")
	c := pipeClient(t, api.NewHandler(d, path, Version, d.log))
	ns := d.target.Subsystem(nqnA).Namespace(1)

	cmd, err := ctl.Parse([]string{"set", "namespace", nqnA, "1", "-iops", "400", "-bandwidth", "4MiB/s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Call(cmd.Method, cmd.Params, &json.RawMessage{}); err != nil {
		t.Fatal(err)
	}
	if got := d.target.Subsystem(nqnA).Namespace(1); got != ns {
		t.Fatal("a qos change replaced the namespace")
	}
	if got := ns.QoS(); got != (fabrics.QoSLimits{IOPS: 400, Bandwidth: 4 << 20}) {
		t.Fatalf("limits %+v after set_namespace", got)
	}
	checkQoSShown(t, d, c)

	// One key given changes that limit only.
	if err := c.Call("set_namespace", json.RawMessage(`{"nqn":"`+nqnA+`","nsid":1,"qos":{"iops":0}}`), &json.RawMessage{}); err != nil {
		t.Fatal(err)
	}
	if got := ns.QoS(); got != (fabrics.QoSLimits{Bandwidth: 4 << 20}) {
		t.Fatalf("limits %+v after removing iops", got)
	}
	var re *api.Error
	err = c.Call("set_namespace", json.RawMessage(`{"nqn":"`+nqnA+`","nsid":1,"qos":{"write_iops":3}}`), nil)
	if !errors.As(err, &re) || re.Code != api.CodeValidationFailed || re.Data.Field != "subsystems[0].namespaces[0].qos.write_iops" {
		t.Fatalf("a limit below the minimum: %v %+v", err, re)
	}

	// A reload sets them as the file says: first none, then others.
	reloadQoS(t, c, dir, "")
	if got := d.target.Subsystem(nqnA).Namespace(1); got != ns || ns.QoS().Limited() {
		t.Fatalf("after a reload without qos: same namespace %v, limits %+v", got == ns, ns.QoS())
	}
	reloadQoS(t, c, dir, "qos: {read_iops: 1000, write_bandwidth: 8MiB}")
	if got := d.target.Subsystem(nqnA).Namespace(1); got != ns || ns.QoS() != (fabrics.QoSLimits{ReadIOPS: 1000, WriteBandwidth: 8 << 20}) {
		t.Fatalf("after a reload with qos: same namespace %v, limits %+v", got == ns, ns.QoS())
	}
}

// checkQoSShown checks that get_state, ctl list and the metrics show the
// limits TestQoSLive set on namespace 1 of a (400 IOPS, 4 MiB/s), and
// none on b's namespace.
func checkQoSShown(t *testing.T, d *Daemon, c *api.Client) {
	t.Helper()
	var raw json.RawMessage
	if err := c.Call("get_state", nil, &raw); err != nil {
		t.Fatal(err)
	}
	var st api.State
	json.Unmarshal(raw, &st)
	if q := st.Subsystems[0].Namespaces[0].QoS; q == nil || q.IOPS != 400 || q.Bandwidth != 4<<20 {
		t.Fatalf("get_state qos %+v", q)
	}
	if q := st.Subsystems[1].Namespaces[0].QoS; q != nil {
		t.Fatalf("get_state shows limits %+v on a namespace without", q)
	}
	if out := ctlListRaw(t, raw); !strings.Contains(out, "qos iops 400, bandwidth 4MiB/s") {
		t.Fatalf("ctl list does not show the limits:\n%s", out)
	}
	limits := map[string]float64{}
	for _, sm := range metricstest.Scrape(t, &metrics.Collector{Target: d.target, Generation: d.Generation}, "nvmeof_tgt_qos_limit") {
		limits[sm.Labels["subsystem"]+"/"+sm.Labels["nsid"]+"/"+sm.Labels["limit"]] = sm.Value
	}
	if len(limits) != 2 || limits[nqnA+"/1/iops"] != 400 || limits[nqnA+"/1/bandwidth"] != 4<<20 {
		t.Fatalf("nvmeof_tgt_qos_limit %v", limits)
	}
}

// reloadQoS writes startBase's configuration to dir/tgt.yaml, with qos
// (a YAML key, or "" for none) on namespace 1 of a, and reloads it
// through c.
func reloadQoS(t *testing.T, c *api.Client, dir, qos string) {
	t.Helper()
	file := baseConfig(dir, "")
	if qos != "" {
		file = strings.Replace(file, "{nsid: 1, backend: nullblk, size: 64MiB}", "{nsid: 1, backend: nullblk, size: 64MiB, "+qos+"}", 1)
	}
	if err := os.WriteFile(filepath.Join(dir, "tgt.yaml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Call("reload", nil, &json.RawMessage{}); err != nil {
		t.Fatal(err)
	}
}

// A daemon started with limits enforces them from the start.
func TestQoSAtStart(t *testing.T) {
	useFakeRDMA(t)
	dir := t.TempDir()
	cfg := strings.Replace(baseConfig(dir, ""), "{nsid: 1, backend: nullblk, size: 64MiB}",
		"{nsid: 1, backend: nullblk, size: 64MiB, qos: {iops: 400}}", 1)
	d, err := Start(parse(t, cfg), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop(0)
	if got := d.target.Subsystem(nqnA).Namespace(1).QoS(); got != (fabrics.QoSLimits{IOPS: 400}) {
		t.Fatalf("limits %+v at start", got)
	}
}
