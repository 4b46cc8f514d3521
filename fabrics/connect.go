package fabrics

import (
	"errors"
	"strconv"

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
	case nvme.FabricsAuthSend, nvme.FabricsAuthRecv:
		if q.ctrl == nil {
			return nvme.StatusCommandSequence | nvme.DNR
		}
		return q.prepareAuth(r)
	default:
		if q.ctrl == nil {
			return nvme.StatusCommandSequence | nvme.DNR
		}
		return nvme.StatusInvalidOpcode | nvme.DNR
	}
	return 0
}

// invalidParam fails a Connect with Connect Invalid Parameters pointing
// at the offending field: at offset in the submission entry, or in the
// data (nvme.ConnectSQE* and nvme.ConnectData* offsets).
func invalidParam(r *Request, offset uint16, inData bool) bool {
	r.status = nvme.StatusConnectInvalidParam | nvme.DNR
	r.result = uint64(nvme.ConnectInvalidParam(offset, inData))
	return true
}

// nqnsPrintable checks that both NQNs are printable ASCII, and if not,
// where the first offending one is. The specification allows UTF-8 without
// control characters; the NQNs hosts generate (nqn.2014-08.org.nvmexpress:
// uuid:…) and the configuration accepts are ASCII, and an NQN ends up in
// logs and in `ctl list` on an administrator's terminal.
func nqnsPrintable(d nvme.ConnectData) (uint16, bool) {
	if !printableASCII(d.SubNQN) {
		return nvme.ConnectDataSubNQN, false
	}
	if !printableASCII(d.HostNQN) {
		return nvme.ConnectDataHostNQN, false
	}
	return 0, true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func execConnect(q *Queue, r *Request) bool {
	log := q.log
	cmd := r.Cmd
	d, err := nvme.ParseConnectData(r.Data)
	if err != nil {
		log.WithError(err).Warn("connect rejected")
		off := uint16(nvme.ConnectDataSubNQN)
		var de *nvme.ConnectDataError
		if errors.As(err, &de) && de.Offset != 0 {
			off = de.Offset
		}
		return invalidParam(r, off, true)
	}
	if off, ok := nqnsPrintable(d); !ok {
		q.target.Refused.Refuse("invalid_nqn", q.port.ID)
		log.WithFields(logrus.Fields{"subsystem": strconv.QuoteToASCII(d.SubNQN), "host": strconv.QuoteToASCII(d.HostNQN)}).
			Warn("connect rejected: an NQN has characters other than printable ASCII")
		return invalidParam(r, off, true)
	}
	log = log.WithFields(logrus.Fields{"subsystem": d.SubNQN, "host": d.HostNQN})
	if cmd.ConnectRecFmt() != 0 {
		r.status = nvme.StatusConnectIncompatibleFormat | nvme.DNR
		return true
	}
	if cmd.ConnectQID() != q.QID {
		log.WithField("connect_qid", cmd.ConnectQID()).Warn("connect rejected: queue ID differs from the one " + qidOrigin(q.tr))
		return invalidParam(r, nvme.ConnectSQEQID, false)
	}
	sqsize := cmd.ConnectSQSize()
	if sqsize == 0 || int(sqsize)+1 > q.depth || (q.QID != 0 && sqsize > q.port.MaxQueueSize-1) {
		log.WithField("sqsize", sqsize).Warn("connect rejected: submission queue size out of range")
		return invalidParam(r, nvme.ConnectSQESQSize, false)
	}
	s := q.target.Subsystem(d.SubNQN)
	if s == nil || !s.OnPort(q.port.ID) {
		q.target.Refused.Refuse("unknown_subsystem", q.port.ID)
		log.Warn("connect rejected: no such subsystem on this port; check the host's -n argument against the configured subsystems")
		// Without DNR, unlike the Linux target: a subsystem removed and
		// added back (ctl, reload) is gone only for a moment, and a host
		// reconnecting meanwhile keeps trying until its ctrl_loss_tmo
		// instead of dropping the controller (the Linux host honours DNR
		// on reconnect since 6.x). A first nvme connect fails either way.
		invalidParam(r, nvme.ConnectDataSubNQN, true)
		r.status &^= nvme.DNR
		return true
	}
	if s.HostRefused(d.HostNQN) {
		s.Stats.Refused.Refuse("host_key_unreadable", q.port.ID)
		log.Warn("connect rejected: the host's dhchap_key could not be read; fix the key file and reload")
		r.status = nvme.StatusConnectInvalidHost | nvme.DNR
		r.result = uint64(nvme.ConnectInvalidParam(nvme.ConnectDataHostNQN, true))
		return true
	}
	if !s.HostAllowed(d.HostNQN) {
		s.Stats.Refused.Refuse("host_not_allowed", q.port.ID)
		log.Warn("connect rejected: host not allowed; add it to the subsystem's hosts or set allow_any_host")
		r.status = nvme.StatusConnectInvalidHost | nvme.DNR
		r.result = uint64(nvme.ConnectInvalidParam(nvme.ConnectDataHostNQN, true))
		return true
	}
	if bad, made := tlsIdentityMismatch(q.tr, d.HostNQN, d.SubNQN); bad {
		s.Stats.Refused.Refuse("tls_identity_mismatch", q.port.ID)
		log.WithField("tls_identity", made).Warn("connect rejected: the connection's TLS channel was made with another host's or subsystem's key")
		r.status = nvme.StatusConnectInvalidHost | nvme.DNR
		r.result = uint64(nvme.ConnectInvalidParam(nvme.ConnectDataHostNQN, true))
		return true
	}
	if !q.place.connect(d.HostNQN) {
		// As for a subsystem at max_controllers: the host tries again
		// once it has given a queue pair back.
		r.status = nvme.StatusConnectControllerBusy | nvme.DNR
		return true
	}
	if q.QID == 0 {
		return connectAdmin(q, r, s, d, log)
	}
	return connectIO(q, r, s, d, log)
}

// connectAdmin creates a controller. Controllers are dynamic: the host
// asks for any ID with FFFFh, and the Linux target refuses anything else.
func connectAdmin(q *Queue, r *Request, s *Subsystem, d nvme.ConnectData, log *logrus.Entry) bool {
	if d.CNTLID != nvme.ControllerIDDynamic {
		s.Stats.Refused.Refuse("static_controller", q.port.ID)
		log.WithField("cntlid", d.CNTLID).Warn("connect rejected: only dynamic controllers (cntlid 0xffff) are supported")
		return invalidParam(r, nvme.ConnectDataCNTLID, true)
	}
	kato := r.Cmd.ConnectKATO()
	if s.isDiscovery && kato == 0 {
		kato = discoveryKATO
	}
	c := newController(s, q, d, kato)
	c.auth = s.authConfigFor(d.HostNQN)
	if c.auth.keys.Host != nil && s.pendingAuth(d.HostNQN) >= maxPendingAuthPerHost {
		s.Stats.Refused.Refuse("authentication_pending", q.port.ID)
		log.WithField("limit", maxPendingAuthPerHost).Warn("connect rejected: the host has as many controllers waiting to authenticate as allowed; someone without its secret may be claiming its NQN")
		r.status = nvme.StatusConnectControllerBusy
		c.auth.keys.clear()
		return true
	}
	if err := s.allocController(c); err != nil {
		// Controller Busy with DNR for both, as the Linux target answers
		// when its controller ID range is used up.
		if errors.Is(err, errNoControllerID) {
			s.Stats.Refused.Refuse("cntlid_range", q.port.ID)
			lo, hi := s.ControllerIDs()
			log.WithFields(logrus.Fields{"cntlid_min": lo, "cntlid_max": hi}).Warn("connect rejected: every controller ID in the subsystem's cntlid_min..cntlid_max is in use; widen the range")
		} else {
			s.Stats.Refused.Refuse("controller_limit", q.port.ID)
			maxCtrls, _ := s.Limits()
			log.WithField("max_controllers", maxCtrls).Warn("connect rejected: the subsystem has as many controllers as its max_controllers allows")
		}
		r.status = nvme.StatusConnectControllerBusy | nvme.DNR
		c.auth.keys.clear()
		return true
	}
	c.log = log.WithField("cntlid", c.ID)
	if st := c.attach(q); st != 0 {
		s.removeController(c)
		c.auth.keys.clear()
		r.status = st
		return true
	}
	q.bind(c, r.Cmd)
	c.log.WithFields(logrus.Fields{"kato_ms": kato, "authentication": c.auth.keys.Host != nil}).Info("controller created")
	r.result = uint64(c.ID)
	// A host that must authenticate cannot send Keep Alive until it has:
	// the authentication deadline stands in for the timer until then.
	if c.auth.keys.Host != nil {
		q.requireAuth()
		c.armAuthDeadline()
		r.result |= nvme.ConnectAuthReqATR
	} else {
		c.keepAlive()
	}
	return true
}

// connectIO binds an I/O queue to the host's controller.
func connectIO(q *Queue, r *Request, s *Subsystem, d nvme.ConnectData, log *logrus.Entry) bool {
	c := s.controller(d.CNTLID)
	if c == nil {
		s.Stats.Refused.Refuse("unknown_controller", q.port.ID)
		log.WithField("cntlid", d.CNTLID).Warn("connect rejected: I/O queue for an unknown controller")
		return invalidParam(r, nvme.ConnectDataCNTLID, true)
	}
	if c.HostNQN != d.HostNQN {
		s.Stats.Refused.Refuse("unknown_controller", q.port.ID)
		log.WithField("cntlid", d.CNTLID).Warn("connect rejected: I/O queue for a controller of another host NQN")
		return invalidParam(r, nvme.ConnectDataHostNQN, true)
	}
	if c.HostID != d.HostID {
		s.Stats.Refused.Refuse("unknown_controller", q.port.ID)
		log.WithField("cntlid", d.CNTLID).Warn("connect rejected: I/O queue with another host ID than its controller's")
		return invalidParam(r, nvme.ConnectDataHostID, true)
	}
	if q.QID > c.maxIOQueues {
		// The discovery controller has no I/O queues at all.
		s.Stats.Refused.Refuse("io_queue_limit", q.port.ID)
		log.WithField("max_io_queues", c.maxIOQueues).Warn("connect rejected: queue ID above the subsystem's max_io_queues")
		return invalidParam(r, nvme.ConnectSQEQID, false)
	}
	if !c.enabled() {
		r.status = nvme.StatusCommandSequence | nvme.DNR
		return true
	}
	c.mu.Lock()
	granted := c.ioQueues
	c.mu.Unlock()
	if q.QID > granted {
		s.Stats.Refused.Refuse("io_queue_limit", q.port.ID)
		log.WithField("granted", granted).Warn("connect rejected: queue ID above the number of queues granted")
		return invalidParam(r, nvme.ConnectSQEQID, false)
	}
	if st := c.attach(q); st != 0 {
		r.status = st
		return true
	}
	q.bind(c, r.Cmd)
	c.sawTraffic()
	r.result = uint64(c.ID)
	c.mu.Lock()
	needAuth := c.auth.keys.Host != nil
	c.mu.Unlock()
	if needAuth {
		q.requireAuth()
		q.armIOAuthDeadline()
		r.result |= nvme.ConnectAuthReqATR
	}
	return true
}

func (q *Queue) bind(c *Controller, connect nvme.Command) {
	q.stopConnectDeadline()
	q.ctrl = c
	q.sqsize = connect.ConnectSQSize() + 1
	q.sqhd = 0
	q.sqFlowOff = connect.ConnectCAttr()&nvme.ConnectSQFlowDisable != 0
	q.log = c.log.WithFields(logrus.Fields{"qid": q.QID, "peer": q.tr.Peer(), "port": q.port.ID})
	log := q.log.WithField("sqsize", q.sqsize)
	if q.sqFlowOff {
		log = log.WithField("sq_flow_control", "disabled")
	}
	log.Info("queue connected")
}

func execProperty(q *Queue, r *Request) bool {
	cmd := r.Cmd
	if !cmd.PropertySizeValid() {
		r.status = nvme.StatusInvalidField | nvme.DNR
		return true
	}
	if cmd.FabricsType() == nvme.FabricsPropertyGet {
		r.result, r.status = q.ctrl.propertyGet(cmd.PropertyOffset(), cmd.PropertySize8())
		return true
	}
	r.status = q.ctrl.propertySet(cmd.PropertyOffset(), cmd.PropertyValue(), cmd.PropertySize8())
	return true
}

// qidOrigin says where a queue's ID came from before its Connect, for
// the log of a Connect that names another.
func qidOrigin(tr QueueTransport) string {
	if tr.TRType() == nvme.TransportRDMA {
		return "in the RDMA connection request"
	}
	return "of the connection's first command"
}
