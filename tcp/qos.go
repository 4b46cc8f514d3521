package tcp

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Resume implements fabrics.Resumer: a command that waited on its
// namespace's QoS limit continues where startCommand left it after
// Prepare. It held no pool buffer for R2T data while it waited; its
// in-capsule data stays in its own pool buffer, which the next PDUs never
// reuse (they go to the stage buffer or to other requests). On a connection
// going away it completes aborted instead: no R2T or execution starts
// there.
func (c *Conn) Resume(fr *fabrics.Request) {
	r := &c.reqs[fr.Tag]
	if c.stopping.Load() || c.closing || c.eof {
		c.fq.Fail(fr, nvme.StatusAbortSQDeleted)
		return
	}
	c.mapData(r)
}
