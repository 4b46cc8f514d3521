package rdma

import (
	"runtime"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/targettest"
)

const (
	recheckNQN  = "nqn.2024-01.io.nvmeof-tgt:recheck"
	recheckHost = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001"
)

// recheckSizes has room for Connect's data in the capsule.
var recheckSizes = queueSizes{depth: 8, nreq: 16, inline: nvme.ConnectDataSize, sendWR: 64, recvWR: 8, cqe: 72, maxRead: 1}

// ioQueuePair is a stub I/O queue pair of a controller connected over a
// loop admin queue, to a subsystem whose namespace 1 is a 4 MiB file.
func ioQueuePair(t *testing.T) (*QueuePair, *fabrics.Subsystem) {
	t.Helper()
	port := &fabrics.Port{ID: 1, InlineDataSize: nvme.ConnectDataSize, MaxQueueSize: 128}
	tg, _ := targettest.FileTarget(t, port, recheckNQN)
	s := tg.Subsystem(recheckNQN)

	data := make([]byte, nvme.ConnectDataSize)
	connect := func(qid uint16, cntlid uint16) nvme.Command {
		c := make(nvme.Command, nvme.CommandSize)
		c.SetOpcode(nvme.OpFabrics)
		c.SetFlags(nvme.PSDTSGLContig)
		c.SetConnect(qid, uint16(recheckSizes.depth-1), 0)
		c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, nvme.ConnectDataSize)
		nvme.ConnectData{HostID: [16]byte{9}, CNTLID: cntlid, SubNQN: recheckNQN, HostNQN: recheckHost}.Encode(data)
		return c
	}
	admin := fabrics.NewLoopQueue(tg, port, 0, 32)
	t.Cleanup(admin.Close)
	rsp, err := admin.Submit(connect(0, 0xffff), data)
	if err != nil || rsp.Status() != 0 {
		t.Fatalf("admin connect: %v %v", err, rsp.Status())
	}
	cntlid := uint16(rsp.Result())
	cc := make(nvme.Command, nvme.CommandSize)
	cc.SetFlags(nvme.PSDTSGLContig)
	cc.SGL().SetKeyed(0, 0, 0, false)
	cc.SetProperty(true, false, nvme.RegCC, nvme.CCEnable|6<<nvme.CCIOSQEShift|4<<nvme.CCIOCQEShift)
	if rsp, err := admin.Submit(cc, nil); err != nil || rsp.Status() != 0 {
		t.Fatalf("enable: %v %v", err, rsp.Status())
	}

	qp := stubQueuePair(t, recheckSizes)
	qp.qid = 1
	qp.fq = fabrics.NewQueue(tg, port, 1, recheckSizes.depth, qp)
	r := capsule(qp, connect(1, cntlid), data)
	for r.state == stateExecuting {
		qp.fq.Reap() // Connect may run on a worker
		runtime.Gosched()
	}
	if st := r.Rsp.Status(); st != 0 {
		t.Fatalf("I/O queue connect: %v", st)
	}
	return qp, s
}

// capsule delivers command c, with in-capsule data, to qp as its poller
// does a receive, and returns its request.
func capsule(qp *QueuePair, c nvme.Command, inline []byte) *request {
	ri := int32(0)
	copy(qp.rq.cmd[ri], c)
	copy(qp.rq.inline[ri], inline)
	tag := qp.freeReqs[len(qp.freeReqs)-1]
	qp.onRecv(ri, nvme.CommandSize+len(inline))
	qp.nwr = 0 // the stub posts nothing
	return &qp.reqs[tag]
}

// A write waiting for a data block, in the pool's line or parked past its
// queue pair's share, while another queue pair holds the pool, does not
// hold up a change of access: hiding its namespace from its host fails
// it with Invalid Namespace on the next poller pass, gives back its place
// in line, and the change returns without waiting out its timeout.
func TestHidingEndsWritesWaitingForABlock(t *testing.T) {
	qp, s := ioQueuePair(t)
	holder := stubQueuePair(t, stubSizes)
	sharedPool(qp, holder)
	holding(t, holder, maxOrder)

	var writes []*request
	for i := range 3 {
		c := make(nvme.Command, nvme.CommandSize)
		c.SetOpcode(nvme.IOWrite)
		c.SetFlags(nvme.PSDTSGLContig)
		c.SetCID(uint16(10 + i))
		c.SetNSID(1)
		c.SetCDW(12, maxBlock/512-1)
		c.SGL().SetKeyed(4096, maxBlock, 7, false)
		writes = append(writes, capsule(qp, c, nil))
	}
	for i, w := range writes {
		if w.state != stateNeedBuffer {
			t.Fatalf("write %d is %s, want waiting for a block", i, w.state)
		}
	}
	if qp.pool.nwait.Load() != 2 || len(qp.parked) != 1 {
		t.Fatalf("%d writes in the pool's line, %d parked; want 2 and 1", qp.pool.nwait.Load(), len(qp.parked))
	}

	done := make(chan error, 1)
	go func() { done <- s.SetNamespaceHosts(1, []string{"nqn.2014-08.org.nvmexpress:uuid:other"}) }()
	for waiting := true; waiting; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("hiding the namespace: %v", err)
			}
			waiting = false
		default:
			qp.runWaiting() // the poller's pass
			qp.nwr = 0
			runtime.Gosched()
		}
	}
	for i, w := range writes {
		if st := w.Rsp.Status(); w.state != stateSending || st != nvme.StatusInvalidNamespace|nvme.DNR {
			t.Errorf("write %d is %s with status %v; want failed with Invalid Namespace", i, w.state, st)
		}
	}
	if qp.pool.nwait.Load() != 0 || len(qp.parked) != 0 || qp.heldBytes != 0 {
		t.Fatalf("%d in the pool's line, %d parked, %d bytes counted against the share; want none",
			qp.pool.nwait.Load(), len(qp.parked), qp.heldBytes)
	}
}
