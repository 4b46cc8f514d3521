package tcp

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// warnHook keeps the warnings logged.
type warnHook struct {
	mu      sync.Mutex
	entries []*logrus.Entry
}

func (h *warnHook) Levels() []logrus.Level { return []logrus.Level{logrus.WarnLevel} }

func (h *warnHook) Fire(e *logrus.Entry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entries = append(h.entries, e)
	return nil
}

func (h *warnHook) matching(prefix string) []*logrus.Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*logrus.Entry
	for _, e := range h.entries {
		if strings.HasPrefix(e.Message, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// The first warning of a kind is logged, the next ones within warnEvery
// are counted and left out, and the one after says how many were.
func TestWarnLimiter(t *testing.T) {
	var l warnLimiter
	t0 := time.Unix(1000, 0)
	if n, ok := l.allow(warnDataTimeout, t0); !ok || n != 0 {
		t.Fatalf("first warning: logged %v, suppressed %d", ok, n)
	}
	for i := range 5 {
		if _, ok := l.allow(warnDataTimeout, t0.Add(time.Duration(i+1)*time.Second)); ok {
			t.Fatalf("warning %d within %v logged", i+2, warnEvery)
		}
	}
	if _, ok := l.allow(warnConnectTimeout, t0.Add(time.Second)); !ok {
		t.Fatal("another kind's first warning was left out")
	}
	if n, ok := l.allow(warnDataTimeout, t0.Add(warnEvery+time.Second)); !ok || n != 5 {
		t.Fatalf("after %v: logged %v, suppressed %d; want logged with 5 left out", warnEvery, ok, n)
	}
}

// Peers that each stall past the connect deadline are all counted, and
// logged once.
func TestConnectTimeoutWarningsRateLimited(t *testing.T) {
	old := connectTimeout
	connectTimeout = 50 * time.Millisecond
	t.Cleanup(func() { connectTimeout = old })
	tg, p, _ := testTarget(t)
	hook := &warnHook{}
	tg.Log.Logger.AddHook(hook)
	l := testListener(t, tg, p)
	before := l.srv.stats.ConnectTimeouts.Load()
	for range 5 {
		expectClosed(t, pair(t, l))
	}
	if n := l.srv.stats.ConnectTimeouts.Load() - before; n != 5 {
		t.Fatalf("%d connect timeouts counted, want 5", n)
	}
	if got := hook.matching("no ICReq and command capsule"); len(got) != 1 {
		t.Fatalf("%d connect timeout warnings logged, want 1", len(got))
	}
}
