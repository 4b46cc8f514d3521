package metrics

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// Server serves /metrics until closed.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Bounds of the metrics endpoint, which has no authentication of its own:
// slow or idle clients must not hold file descriptors the RDMA side needs.
const (
	metricsMaxConns     = 16 // Prometheus keeps one connection per scraper
	metricsReadTimeout  = 10 * time.Second
	metricsWriteTimeout = 30 * time.Second
	metricsIdleTimeout  = 60 * time.Second // above the usual 15-30 s scrape interval
)

// Close stops serving and closes the listener.
func (m *Server) Close() { m.srv.Close() }

// Serve listens on addr and serves c's metrics, Go's and the process's on
// /metrics in the background.
func Serve(addr string, c prometheus.Collector, log *logrus.Entry) (*Server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.address %s: %w (another process listens there, or the address is not local)", addr, err)
	}
	ln = &limitListener{Listener: ln, slots: make(chan struct{}, metricsMaxConns)}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: metricsReadTimeout, ReadTimeout: metricsReadTimeout,
		WriteTimeout: metricsWriteTimeout, IdleTimeout: metricsIdleTimeout, MaxHeaderBytes: 8 << 10}
	log.WithField("address", addr).Info("serving metrics")
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("metrics endpoint failed")
		}
	}()
	return &Server{srv, ln}, nil
}

// limitListener closes connections beyond the number of its slots as soon
// as they are accepted.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
		default:
			c.Close()
		}
	}
}

// slotConn gives its slot back when closed, once.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
