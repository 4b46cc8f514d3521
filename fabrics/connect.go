package fabrics

import (
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"github.com/sirupsen/logrus"
)

func (q *Queue) prepareFabrics(r *Request) nvme.Status {
	switch r.Cmd.FabricsType() {
	case nvme.FabricsConnect:
		if q.ctrl != nil {
			return nvme.StatusCommandSequence | nvme.DNR
		}
		r.Dir, r.Len, r.handler = DirHostToCtrl, nvme.ConnectDataSize, execConnect
	case nvme.FabricsPropertyGet, nvme.FabricsPropertySet:
		if q.ctrl == nil || q.QID != 0 {
			return nvme.StatusCommandSequence | nvme.DNR
		}
		r.handler = execProperty
	default:
		if q.ctrl == nil {
			return nvme.StatusCommandSequence | nvme.DNR
		}
		return nvme.StatusInvalidOpcode | nvme.DNR
	}
	return 0
}

// invalidParam fails a Connect pointing at the offending byte: in the
// command (data=false) or in its data.
func invalidParam(r *Request, offset uint16, data bool) bool {
	r.status = nvme.StatusConnectInvalidParam | nvme.DNR
	r.result = uint64(offset)
	if data {
		r.result |= 1 << 16
	}
	return true
}

func execConnect(q *Queue, r *Request) bool {
	log := q.log
	cmd := r.Cmd
	d, err := nvme.ParseConnectData(r.Data)
	if err != nil {
		log.Warn("connect rejected: malformed connect data")
		return invalidParam(r, 256, true)
	}
	log = log.WithFields(logrus.Fields{"subsystem": d.SubNQN, "host": d.HostNQN})
	if cmd.ConnectRecFmt() != 0 {
		r.status = nvme.StatusConnectIncompatibleFormat | nvme.DNR
		return true
	}
	if cmd.ConnectQID() != q.QID {
		log.WithField("connect_qid", cmd.ConnectQID()).Warn("connect rejected: queue ID differs from the one in the RDMA connection request")
		return invalidParam(r, 42, false)
	}
	sqsize := cmd.ConnectSQSize()
	if sqsize == 0 || int(sqsize)+1 > q.depth {
		log.WithField("sqsize", sqsize).Warn("connect rejected: submission queue size out of range")
		return invalidParam(r, 44, false)
	}
	s := q.target.Subsystem(d.SubNQN)
	if s == nil || !s.OnPort(q.port.ID) {
		q.target.Refused.refuse("unknown_subsystem", q.port.ID)
		log.Warn("connect rejected: no such subsystem on this port; check the host's -n argument against the configured subsystems")
		return invalidParam(r, 256, true)
	}
	if !s.HostAllowed(d.HostNQN) {
		s.Stats.Refused.refuse("host_not_allowed", q.port.ID)
		log.Warn("connect rejected: host not allowed; add it to the subsystem's hosts or set allow_any_host")
		r.status = nvme.StatusConnectInvalidHost | nvme.DNR
		return true
	}
	if q.QID == 0 {
		if d.CNTLID != nvme.ControllerIDDynamic {
			s.Stats.Refused.refuse("static_controller", q.port.ID)
			log.WithField("cntlid", d.CNTLID).Warn("connect rejected: only dynamic controllers are supported")
			return invalidParam(r, 16, true)
		}
		c := newController(s, q, d, cmd.ConnectKATO())
		if err := s.allocController(c); err != nil {
			r.status = nvme.StatusConnectControllerBusy
			return true
		}
		c.log = log.WithField("cntlid", c.ID)
		if st := c.attach(q); st != 0 {
			s.removeController(c)
			r.status = st
			return true
		}
		q.bind(c, sqsize)
		c.log.WithField("kato_ms", cmd.ConnectKATO()).Info("controller created")
		r.result = uint64(c.ID)
		return true
	}
	c := s.controller(d.CNTLID)
	if c == nil || c.HostNQN != d.HostNQN {
		s.Stats.Refused.refuse("unknown_controller", q.port.ID)
		log.WithField("cntlid", d.CNTLID).Warn("connect rejected: I/O queue for an unknown controller")
		return invalidParam(r, 16, true)
	}
	if !c.Ready() {
		r.status = nvme.StatusCommandSequence | nvme.DNR
		return true
	}
	c.mu.Lock()
	granted := c.ioQueues
	c.mu.Unlock()
	if q.QID > granted {
		log.WithField("granted", granted).Warn("connect rejected: queue ID above the number of queues granted")
		return invalidParam(r, 42, false)
	}
	if st := c.attach(q); st != 0 {
		r.status = st
		return true
	}
	q.bind(c, sqsize)
	r.result = uint64(c.ID)
	return true
}

func (q *Queue) bind(c *Controller, sqsize uint16) {
	q.ctrl = c
	q.sqsize = sqsize + 1
	q.sqhd = 0
	q.log = c.log.WithFields(logrus.Fields{"qid": q.QID, "peer": q.tr.Peer(), "port": q.port.ID})
	q.log.WithField("sqsize", q.sqsize).Info("queue connected")
}

func execProperty(q *Queue, r *Request) bool {
	cmd := r.Cmd
	if cmd.FabricsType() == nvme.FabricsPropertyGet {
		r.result, r.status = q.ctrl.propertyGet(cmd.PropertyOffset(), cmd.PropertySize8())
		return true
	}
	r.status = q.ctrl.propertySet(cmd.PropertyOffset(), cmd.PropertyValue(), cmd.PropertySize8())
	return true
}
