package daemon

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/tcp"
)

// freeTCPPort finds a port number nothing listens on.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// icreq opens a connection to addr and initializes it: the port speaks
// NVMe/TCP.
func icreq(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b [tcp.ICReqSize]byte
	tcp.PutICReq(b[:], tcp.PFV, 0, 0, 0)
	if _, err := c.Write(b[:]); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, b[:tcp.ICRespSize]); err != nil {
		return err
	}
	if h := tcp.Header(b[:]); h.Type() != tcp.TypeICResp {
		return fmt.Errorf("PDU type %#x, want ICResp", h.Type())
	}
	return nil
}

// A port with transport: tcp listens on TCP through the daemon's start and
// reload, beside an RDMA port, and stops when a reload removes it.
func TestTCPPortStartReloadStop(t *testing.T) {
	rdma := useFakeRDMA(t) // the TCP port is real
	dir := t.TempDir()
	port := freeTCPPort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := parse(t, baseConfig(dir, ""))
	cfg.Ports = append(cfg.Ports, parse(t, fmt.Sprintf("ports: [{id: 2, transport: tcp, address: 127.0.0.1, port: %d}]\nsubsystems: []", port)).Ports...)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := Start(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(time.Second) })
	if len(rdma.opened) != 1 || rdma.opened[0].port.ID != 1 {
		t.Fatalf("RDMA listeners %v, want port 1 only", rdma.opened)
	}
	if p := d.target.Port(2); p == nil || p.Transport != nvme.TransportTCP {
		t.Fatalf("port 2 %+v, want transport tcp", p)
	}
	if err := icreq(addr); err != nil {
		t.Fatalf("TCP port after start: %v", err)
	}
	// get_state names each port's transport: blktests' control script
	// picks the port of the transport its host connects with.
	if st := api.StateOf(d); len(st.Ports) != 2 || st.Ports[0].Transport != "rdma" || st.Ports[1].Transport != "tcp" {
		t.Fatalf("get_state ports %+v, want port 1 rdma and port 2 tcp", st.Ports)
	}
	// A reload without the TCP port closes it.
	if err := d.Apply(parse(t, baseConfig(dir, ""))); err != nil {
		t.Fatal(err)
	}
	if err := icreq(addr); err == nil {
		t.Fatal("the removed TCP port still answers")
	}
	// And one that adds it back listens again.
	if err := d.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if err := icreq(addr); err != nil {
		t.Fatalf("TCP port after reload: %v", err)
	}
}
