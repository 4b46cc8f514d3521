package fabrics

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// Every controller and queue event carries the fields operators filter on.
func TestEventLogFields(t *testing.T) {
	var buf bytes.Buffer
	logger := logrus.New()
	logger.SetOutput(&buf)
	logger.SetFormatter(&logrus.JSONFormatter{})
	tg := NewTarget(logrus.NewEntry(logger))
	p := &Port{ID: 3, Address: netip.MustParseAddr("10.0.0.1"), ServiceID: 4420, InlineDataSize: 8192, MaxQueueSize: 128}
	if err := tg.AddPort(p); err != nil {
		t.Fatal(err)
	}
	s := NewSubsystem(testNQN, "", "", true)
	ns, _ := NewNamespace(1, newMem(1<<20, 512), false, [16]byte{1})
	s.AddNamespace(ns)
	tg.AddSubsystem(s)
	h := connect(t, tg, p, testNQN)
	h.io.Close()
	h.io = nil
	h.admin.Close()

	want := map[string]bool{"controller created": false, "controller enabled": false, "queue connected": false,
		"queue disconnected": false, "controller removed": false}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		msg, _ := e["msg"].(string)
		if _, ok := want[msg]; !ok {
			continue
		}
		want[msg] = true
		for _, f := range []string{"subsystem", "host", "cntlid", "qid", "peer", "port"} {
			if _, ok := e[f]; !ok {
				t.Errorf("%q lacks field %s: %s", msg, f, line)
			}
		}
		if e["subsystem"] != testNQN || e["host"] != testHost || e["port"] != float64(3) {
			t.Errorf("%q has wrong fields: %s", msg, line)
		}
	}
	for msg, seen := range want {
		if !seen {
			t.Errorf("no %q entry at info level in:\n%s", msg, buf.String())
		}
	}
}
