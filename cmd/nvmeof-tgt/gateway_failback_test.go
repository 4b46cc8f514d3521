package main

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// recordingLeaseObject keeps the holder's record as the object's
// attribute does.
type recordingLeaseObject struct {
	fakeLeaseObject
	rec string
}

func (f *recordingLeaseObject) Holder() (string, error)  { return f.rec, nil }
func (f *recordingLeaseObject) SetHolder(v string) error { f.rec = v; return nil }

// A failback's handover survives the trip through the lease object, and
// a record from an older run, of three lines, reads as an owner with none.
func TestRadosStoreRecordsTheHandover(t *testing.T) {
	o := &recordingLeaseObject{}
	s := &radosStore{l: o}
	for _, h := range []gateway.Holder{{Handover: "gw-a"}, {Name: "gw-b", Cookie: "gw-b.1", Addr: "10.0.0.2:0/2"}, {}} {
		if err := s.Record(h); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Recorded(); got != h || err != nil {
			t.Fatalf("recorded %+v, read back %+v (%v)", h, got, err)
		}
	}
	o.rec = "gw-b\ngw-b.1\n10.0.0.2:0/2"
	if got, _ := s.Recorded(); got != (gateway.Holder{Name: "gw-b", Cookie: "gw-b.1", Addr: "10.0.0.2:0/2"}) {
		t.Fatalf("an older run's record read as %+v", got)
	}
}

// nvmeof_tgt_gateway_failbacks_total counts each group's failbacks.
func TestGatewayFailbacksMetric(t *testing.T) {
	gs := &gatewaySet{runners: []*gateway.Runner{{Lease: &gateway.Lease{Group: 3, Failbacks: 2}}}}
	runningGateway.Store(gs)
	defer runningGateway.CompareAndSwap(gs, nil)
	ch := make(chan prometheus.Metric, 100)
	collectGateway(emit{ch})
	close(ch)
	found := false
	for m := range ch {
		if m.Desc() != dGatewayFailbacks {
			continue
		}
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		if v, g := out.GetCounter().GetValue(), out.GetLabel()[0].GetValue(); v != 2 || g != "3" {
			t.Fatalf("failbacks %v for group %s", v, g)
		}
		found = true
	}
	if !found {
		t.Fatal("no nvmeof_tgt_gateway_failbacks_total")
	}
}
