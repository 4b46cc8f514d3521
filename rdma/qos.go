package rdma

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Resume implements fabrics.Resumer: a command that waited on its
// namespace's QoS limit, holding no data buffer, maps its data now, taking
// a buffer (or waiting for one) as a command just received does. On a
// queue pair going away it completes aborted instead: no new transfer
// starts there.
func (qp *QueuePair) Resume(fr *fabrics.Request) {
	r := &qp.reqs[fr.Tag]
	if qp.stopping.Load() {
		qp.fq.Fail(fr, nvme.StatusAbortSQDeleted)
		return
	}
	qp.mapData(r)
}
