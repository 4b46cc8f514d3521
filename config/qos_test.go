package config

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

var qosYAML = oneSubsystem(`
      - nsid: 1
        backend: nullblk
        size: 1GiB
        qos: {iops: 400, read_bandwidth: 100MiB/s, write_bandwidth: 50MiB, bandwidth: 2097152}
      - {nsid: 2, backend: nullblk, size: 1GiB}`)

func TestQoSParse(t *testing.T) {
	c := mustParse(t, qosYAML)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := QoS{IOPS: 400, Bandwidth: 2 << 20, ReadBandwidth: 100 << 20, WriteBandwidth: 50 << 20}
	if got := c.Subsystems[0].Namespaces[0].QoS; got != want {
		t.Fatalf("qos %+v, want %+v", got, want)
	}
	if c.Subsystems[0].Namespaces[1].QoS.Limited() {
		t.Fatal("a namespace without qos is limited")
	}
	out, err := yaml.Marshal(c.Subsystems[0].Namespaces[0].QoS)
	if err != nil {
		t.Fatal(err)
	}
	var back QoS
	if err := yaml.Unmarshal(out, &back); err != nil || back != want {
		t.Fatalf("round trip %q: %+v %v", out, back, err)
	}
	if strings.Contains(string(out), "iops: 0") || !strings.Contains(string(out), "read_bandwidth: 100MiB") {
		t.Fatalf("marshalled %q", out)
	}
}

func TestQoSValidate(t *testing.T) {
	for _, tc := range []struct {
		qos  string
		path string
	}{
		{"{iops: 5}", "subsystems[0].namespaces[0].qos.iops"},
		{"{write_iops: 9}", "subsystems[0].namespaces[0].qos.write_iops"},
		{"{bandwidth: 512KiB}", "subsystems[0].namespaces[0].qos.bandwidth"},
		{"{read_bandwidth: 4096}", "subsystems[0].namespaces[0].qos.read_bandwidth"},
	} {
		_, err := Parse([]byte(strings.Replace(qosYAML, "{iops: 400, read_bandwidth: 100MiB/s, write_bandwidth: 50MiB, bandwidth: 2097152}", tc.qos, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.path+":") {
			t.Errorf("qos %s: %v, want an error at %s", tc.qos, err, tc.path)
		}
	}
	if _, err := Parse([]byte(strings.Replace(qosYAML, "100MiB/s", "fast", 1))); err == nil || !strings.Contains(err.Error(), `invalid rate "fast"`) {
		t.Fatalf("a rate that is no size: %v", err)
	}
}

// A change of limits keeps the namespace, with its hosts: it is changed in
// place, not removed and added.
func TestQoSDiff(t *testing.T) {
	cur := mustParse(t, qosYAML)
	next := mustParse(t, strings.Replace(strings.Replace(qosYAML, "iops: 400", "iops: 800", 1),
		"{nsid: 2, backend: nullblk, size: 1GiB}", "{nsid: 2, backend: nullblk, size: 2GiB, qos: {iops: 100}}", 1))
	p := Diff(cur, next)
	if len(p.DelNamespaces) != 0 || len(p.AddNamespaces) != 0 {
		t.Fatalf("a qos change removes %v and adds %v", nsids(p.DelNamespaces), nsids(p.AddNamespaces))
	}
	if len(p.QoS) != 2 || p.QoS[0].QoS.IOPS != 800 || p.QoS[1].QoS.IOPS != 100 {
		t.Fatalf("qos plan %+v", p.QoS)
	}
	if len(p.ResizeNamespaces) != 1 {
		t.Fatalf("resize plan %v, want namespace 2 (size and qos changed together)", nsids(p.ResizeNamespaces))
	}
	if p := Diff(cur, mustParse(t, qosYAML)); len(p.QoS) != 0 {
		t.Fatalf("qos plan %+v without a change", p.QoS)
	}
}
