package config

import (
	"reflect"
	"strings"
	"testing"
)

// inlineCases are ports whose inline_data_size is written out, left out or
// 0; each must load to the size given and survive Marshal and Load.
var inlineCases = []struct {
	name string
	port string // the ports entry, in YAML flow style
	want uint32
}{
	{"absent", "{id: 1, address: 10.0.0.1}", DefaultInlineDataSize},
	{"zero", "{id: 1, address: 10.0.0.1, inline_data_size: 0}", 0},
	{"default written", "{id: 1, address: 10.0.0.1, inline_data_size: 8192}", DefaultInlineDataSize},
	{"other", "{id: 1, address: 10.0.0.1, inline_data_size: 16}", 16},
	{"largest", "{id: 1, address: 10.0.0.1, inline_data_size: 131072}", MaxInlineDataSize},
}

func TestInlineDataSizeRoundTrip(t *testing.T) {
	for _, tc := range inlineCases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte("ports: [" + tc.port + "]\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Ports[0].InlineDataSize; got != tc.want {
				t.Fatalf("loaded inline_data_size %d, want %d", got, tc.want)
			}
			out, err := Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			// Written always, so that a saved configuration reloads as it ran.
			if !strings.Contains(string(out), "inline_data_size: ") {
				t.Fatalf("marshalled port lacks inline_data_size:\n%s", out)
			}
			back, err := Parse(out)
			if err != nil {
				t.Fatalf("re-parse: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(c.Ports, back.Ports) {
				t.Fatalf("round trip differs:\n%+v\n%+v\n%s", c.Ports, back.Ports, out)
			}
			// A reload of the saved file changes nothing.
			if p := Diff(c, back); !reflect.DeepEqual(p, Plan{}) {
				t.Fatalf("reloading the saved file plans %+v", p)
			}
		})
	}
}

// TestInlineDataSizeSurvivesEdits: a running configuration is cloned and
// defaulted again by every admin change; an explicit 0 must stay 0 and a
// port built in code without the field still gets the default.
func TestInlineDataSizeSurvivesEdits(t *testing.T) {
	c, err := Parse([]byte("ports: [{id: 1, address: 10.0.0.1, inline_data_size: 0}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	next := c.Clone()
	var added, off Port
	added.ID, added.Address = 2, "10.0.0.1"
	off.ID, off.Address = 3, "10.0.0.1"
	off.SetInlineDataSize(0)
	next.Ports = append(next.Ports, added, off)
	next.ApplyDefaults()
	for i, want := range []uint32{0, DefaultInlineDataSize, 0} {
		if got := next.Ports[i].InlineDataSize; got != want {
			t.Errorf("port %d: inline_data_size %d, want %d", next.Ports[i].ID, got, want)
		}
	}
	if p := Diff(c, next); len(p.DelPorts) != 0 || len(p.AddPorts) != 2 {
		t.Errorf("adding two ports plans deletes %v, adds %v", p.DelPorts, p.AddPorts)
	}
}

// TestPortStrict: the port decoder keeps the strict parse's refusal of
// unknown keys.
func TestPortStrict(t *testing.T) {
	_, err := Parse([]byte("ports: [{id: 1, address: 10.0.0.1, inline_size: 0}]\n"))
	if err == nil || !strings.Contains(err.Error(), "inline_size") {
		t.Fatalf("unknown port key: %v", err)
	}
}
