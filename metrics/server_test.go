package metrics

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// The metrics endpoint bounds its connections and how long a client may
// hold one: connections beyond metricsMaxConns are closed at once, and
// the server times out slow and idle clients.
func TestMetricsEndpointBounds(t *testing.T) {
	m, err := Serve("127.0.0.1:0", prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "a test counter"}), quietLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if m.srv.ReadTimeout == 0 || m.srv.WriteTimeout == 0 || m.srv.IdleTimeout == 0 {
		t.Fatalf("timeouts read %v, write %v, idle %v: a client may hold a connection for ever",
			m.srv.ReadTimeout, m.srv.WriteTimeout, m.srv.IdleTimeout)
	}
	addr := m.ln.Addr().String()
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	// Each connection is known accepted once it answered a request.
	for range metricsMaxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		rsp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || rsp.StatusCode != 200 {
			t.Fatalf("scrape %d: %v", len(held), err)
		}
		io.Copy(io.Discard, rsp.Body)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection %d beyond the limit of %d: read %v, want it closed", metricsMaxConns+1, metricsMaxConns, err)
	}
	// A slot freed is a slot taken again.
	held[0].Close()
	held = held[1:]
	// A new connection each try: a pooled one the server closed would
	// fail as "server closed idle connection", which says nothing here.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for try := 0; ; try++ {
		if try == 10000 {
			t.Fatal("the freed slot was never taken again")
		}
		rsp, err := client.Get("http://" + addr + "/metrics")
		if err == nil {
			rsp.Body.Close()
			if rsp.StatusCode != 200 {
				t.Fatal(rsp.Status)
			}
			break
		}
		// The server sees the close asynchronously; a refused attempt
		// until then is the limit working.
		if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") && !strings.Contains(err.Error(), "EOF") &&
			!strings.Contains(err.Error(), "closed") {
			t.Fatal(err)
		}
	}
}

// quietLog is a log that drops everything.
func quietLog(t *testing.T) *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l.WithField("test", t.Name())
}
