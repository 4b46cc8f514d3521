package rdma

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

// sizeCase is a queue sizing, with an in-capsule size of 8 KiB and an
// initiator depth of 16, and what it must come to.
type sizeCase struct {
	name     string
	depth    int
	admin    bool
	srq      int // entries of the shared receive queue; 0: a ring of its own
	lim      deviceLimits
	wantErr  bool
	wantSend int
}

// runSizeCases sizes each case's queue: one that wants an error must get
// one, which failed checks further; any other must get the send queue it
// wants, and pass check.
func runSizeCases(t *testing.T, cases []sizeCase, failed func(t *testing.T, err error), check func(t *testing.T, c sizeCase, sz queueSizes)) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sz, err := sizeQueue(c.depth, c.admin, 8192, c.lim, 16, c.srq)
			if c.wantErr {
				if err == nil {
					t.Fatalf("sized %+v for a device that cannot hold it", sz)
				}
				failed(t, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sz.sendWR != c.wantSend {
				t.Errorf("send queue %d, want %d", sz.sendWR, c.wantSend)
			}
			check(t, c, sz)
		})
	}
}

// The completion queue holds every work request that can be outstanding:
// on an error the device completes all of them, signaled or not. Where the
// device's CQ is too small, the send queue shrinks to fit, never the CQ.
func TestSizeQueueCQHoldsEverything(t *testing.T) {
	big := deviceLimits{maxQPWR: 16384, maxCQE: 1 << 20, maxReadAtom: 128}
	runSizeCases(t, []sizeCase{
		{"admin", 32, true, 0, big, false, 2*64 + 1},
		{"io 128", 128, false, 0, big, false, 2*256 + 1},
		{"io 1", 1, false, 0, big, false, minSendWR},
		{"small CQ shrinks the send queue", 128, false, 0, deviceLimits{16384, 300, 16}, false, 300 - 128},
		{"small max_qp_wr", 128, false, 0, deviceLimits{200, 1 << 20, 16}, false, 200},
		{"CQ too small for any queue", 128, false, 0, deviceLimits{16384, 140, 16}, true, 0},
		{"receive queue too large", 128, false, 0, deviceLimits{64, 1 << 20, 16}, true, 0},
	}, func(*testing.T, error) {}, func(t *testing.T, c sizeCase, sz queueSizes) {
		if sz.cqe < sz.sendWR+sz.recvWR || sz.cqe > c.lim.maxCQE {
			t.Errorf("CQ of %d entries for %d send + %d receive work requests (device max %d)", sz.cqe, sz.sendWR, sz.recvWR, c.lim.maxCQE)
		}
		if sz.sendWR < minSendWR || sz.sendWR > c.lim.maxQPWR {
			t.Errorf("send queue %d outside [%d, %d]", sz.sendWR, minSendWR, c.lim.maxQPWR)
		}
		if sz.recvWR != c.depth {
			t.Errorf("%d receives for a depth of %d", sz.recvWR, c.depth)
		}
	})
}

// On a shared receive queue a host can send past its queue size, and
// every command it sends takes an entry of the shared queue until the
// poller sees its completion: the completion queue must hold them all, or
// it overflows and the entries whose completions it drops are lost to
// every host. Where the device cannot have a CQ that large, sizing fails
// and the queue pair gets its own ring instead (newQueuePair).
func TestSizeQueueCQHoldsTheSharedReceiveQueue(t *testing.T) {
	big := deviceLimits{maxQPWR: 16384, maxCQE: 1 << 20, maxReadAtom: 128}
	runSizeCases(t, []sizeCase{
		{"io on the default SRQ", 128, false, 4096, big, false, 2*256 + 1},
		{"admin on its SRQ", 32, false, 256, big, false, 2*64 + 1},
		{"CQ shrinks the send queue", 128, false, 4096, deviceLimits{16384, 4096 + 300, 16}, false, 300},
		{"soft-RoCE limits", 128, false, 16384, deviceLimits{16384, 32767, 16}, false, 2*256 + 1},
		{"CQ smaller than the SRQ", 128, false, 4096, deviceLimits{16384, 4096, 16}, true, 0},
	}, func(t *testing.T, err error) {
		if !strings.Contains(err.Error(), "rdma.receive_queue_depth") {
			t.Errorf("error %q does not name rdma.receive_queue_depth", err)
		}
	}, func(t *testing.T, c sizeCase, sz queueSizes) {
		if sz.cqe < sz.sendWR+c.srq || sz.cqe > c.lim.maxCQE {
			t.Errorf("CQ of %d entries for %d send work requests and an SRQ of %d (device max %d)", sz.cqe, sz.sendWR, c.srq, c.lim.maxCQE)
		}
	})
}

// A queue pair that cannot be set up is an error for that one connection,
// never a crash.
func TestNewQueuePairFailsCleanly(t *testing.T) {
	log := logrus.NewEntry(logrus.New())
	l := &Listener{target: fabrics.NewTarget(log), port: &fabrics.Port{ID: 1, MaxQueueSize: 128, InlineDataSize: 8192}, log: log}
	dev := &device{}
	dev.info.max_qp_wr, dev.info.max_cqe, dev.info.max_qp_init_rd_atom = 16, 16, 1
	qp, err := newQueuePair(l, nil, dev, nvme.CMRequest{QID: 1, HSQSize: 127, HRQSize: 128}, "peer", 1)
	if err == nil || qp != nil {
		t.Fatalf("newQueuePair on a device too small: %v, %v", qp, err)
	}
	t.Log(err)
}

func TestSetUpFixNamesTheLimit(t *testing.T) {
	fix := setUpFix(fmtWrap(syscall.ENOMEM), 3)
	for _, want := range []string{"LimitMEMLOCK", "ulimit -l", "max_queue_size", "port 3"} {
		if !strings.Contains(fix, want) {
			t.Errorf("fix %q does not mention %q", fix, want)
		}
	}
	if strings.Contains(setUpFix(errors.New("other"), 3), "LimitMEMLOCK") {
		t.Error("a failure that is not about memory blamed the memory limit")
	}
}

func fmtWrap(err error) error { return errors.Join(errors.New("register 1 bytes of memory"), err) }

// Flush errors follow an error or a disconnect, which is logged already:
// one warning per queue, not one per request.
func TestCompletionLogLevel(t *testing.T) {
	for _, c := range []struct {
		flush, stopping, failedBefore bool
		want                          logrus.Level
	}{
		{false, false, false, logrus.WarnLevel},
		{false, false, true, logrus.DebugLevel},
		{true, false, false, logrus.DebugLevel},
		{false, true, false, logrus.DebugLevel},
		{true, true, true, logrus.DebugLevel},
	} {
		if got := completionLogLevel(c.flush, c.stopping, c.failedBefore); got != c.want {
			t.Errorf("flush=%v stopping=%v failed before=%v: %v, want %v", c.flush, c.stopping, c.failedBefore, got, c.want)
		}
	}
}

// iWARP needs RDMA READ sinks remotely writable; other transports get no
// remote access at all.
func TestRegionAccess(t *testing.T) {
	if got := int(deviceCaps{iwarp: true}.regionAccess()); got&accessRemoteWrite == 0 {
		t.Errorf("iWARP region access %#x lacks remote write", got)
	}
	if got := int(deviceCaps{sendInvalidate: true}.regionAccess()); got != 0 {
		t.Errorf("RoCE/IB region access %#x, want none beyond local write", got)
	}
	// Receive buffers are written by the device's own receives only: no
	// peer may write the commands other hosts are about to run.
	if got := int(recvRingAccess); got != 0 {
		t.Errorf("receive ring access %#x, want none beyond local write, on iWARP too", got)
	}
}

func TestTransferDescriptors(t *testing.T) {
	d := []fabrics.Keyed{{Len: 4096}, {Len: 4096}, {Len: 8192}}
	for _, c := range []struct {
		n    uint32
		want int
	}{{1, 1}, {4096, 1}, {4097, 2}, {8192, 2}, {16384, 3}, {1 << 20, 3}} {
		if got := transferDescriptors(d, c.n); got != c.want {
			t.Errorf("%d bytes over %v: %d descriptors, want %d", c.n, d, got, c.want)
		}
	}
}

func TestRejectReason(t *testing.T) {
	if got := rejectReason(nvme.CMRejectNoResources); got != "no_resources" {
		t.Errorf("no resources: %q", got)
	}
	if got := rejectReason(nvme.CMRejectInvalidHSQSize); got != "invalid_hsqsize" {
		t.Errorf("invalid hsqsize: %q", got)
	}
}

// Fatal events disconnect what they name; informational ones nothing.
func TestAsyncEventScope(t *testing.T) {
	for _, c := range []struct {
		typ  int
		want eventScope
	}{
		{evQPFatal, scopeQP}, {evQPReqErr, scopeQP}, {evQPAccessErr, scopeQP}, {evPathMigErr, scopeQP},
		{evCQErr, scopeCQ}, {evPortErr, scopePort}, {evDeviceFatal, scopeDevice},
		{evPortActive, scopeNone}, {evCommEst, scopeNone},
	} {
		if got := asyncEventScope(c.typ); got != c.want {
			t.Errorf("event %d: scope %d, want %d", c.typ, got, c.want)
		}
	}
}
