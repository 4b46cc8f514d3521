package rdma

// sendBudget accounts what one queue pair has outstanding on its send
// queue, so that ibv_post_send never fails for want of room:
//
//   - slots: every work request posted to the send queue holds a slot until
//     a signaled completion at or after it is polled. A request's RDMA
//     READs are one chain whose last is signaled; its response is a chain
//     of RDMA WRITEs and a signaled SEND. So each chain's slots come back
//     at its one completion.
//   - reads: RDMA READs in flight, bounded by the initiator depth agreed at
//     accept (the host's responder resources). A device queues READs beyond
//     it in the send queue, stalling every response behind them.
//
// A request that does not fit waits, in arrival order, as nvmet's
// rsp_wait_list and SPDK's pending RDMA READ queue do. Waiting responses
// go before waiting reads: a response gives a request back, a read holds
// one longer. Nothing here allocates once the queues are sized.
type sendBudget struct {
	slots, maxSlots int
	reads, maxReads int
	sendWait        chargeRing // responses (WRITEs + SEND) waiting for slots
	readWait        chargeRing // RDMA READ chains waiting for slots or read credits
}

// charge is what one chain of work requests holds until its completion.
type charge struct {
	tag          int32
	slots, reads int32
}

// newSendBudget sizes a budget for a send queue of maxSlots work requests,
// maxReads RDMA READs in flight and up to waiters requests waiting.
// maxSlots must fit the longest chain a request posts.
func newSendBudget(maxSlots, maxReads, waiters int) sendBudget {
	return sendBudget{
		maxSlots: maxSlots, maxReads: max(maxReads, 1),
		sendWait: newChargeRing(waiters), readWait: newChargeRing(waiters),
	}
}

func (b *sendBudget) fits(c charge) bool {
	return b.slots+int(c.slots) <= b.maxSlots && b.reads+int(c.reads) <= b.maxReads
}

func (b *sendBudget) take(c charge) {
	b.slots += int(c.slots)
	b.reads += int(c.reads)
}

// retire gives back what a completed chain held.
func (b *sendBudget) retire(c charge) {
	b.slots -= int(c.slots)
	b.reads -= int(c.reads)
}

// readCharge is what a chain of n RDMA READs holds. A chain longer than
// the whole read budget is charged the whole budget: it then runs alone,
// and the device paces it.
func (b *sendBudget) readCharge(tag int32, n int) charge {
	return charge{tag: tag, slots: int32(n), reads: int32(min(n, b.maxReads))}
}

// sendCharge is what a response of writes RDMA WRITEs and one SEND holds.
func sendCharge(tag int32, writes int) charge {
	return charge{tag: tag, slots: int32(writes + 1)}
}

// tryRead takes the credits for request tag's n RDMA READs, or queues the
// request behind those already waiting and returns false.
func (b *sendBudget) tryRead(tag int32, n int) (charge, bool) {
	c := b.readCharge(tag, n)
	if b.sendWait.empty() && b.readWait.empty() && b.fits(c) {
		b.take(c)
		return c, true
	}
	b.readWait.push(c)
	return charge{}, false
}

// trySend takes the credits for request tag's response, or queues it.
func (b *sendBudget) trySend(tag int32, writes int) (charge, bool) {
	c := sendCharge(tag, writes)
	if b.sendWait.empty() && b.fits(c) {
		b.take(c)
		return c, true
	}
	b.sendWait.push(c)
	return charge{}, false
}

// next hands out the credits of the oldest waiting chain that now fits,
// responses first; ok is false when none does. read tells which kind it is.
func (b *sendBudget) next() (c charge, read, ok bool) {
	if !b.sendWait.empty() {
		c, ok = b.admit(&b.sendWait)
		return c, false, ok
	}
	c, ok = b.admit(&b.readWait)
	return c, true, ok
}

// admit takes the oldest chain of q off it with its credits, if it fits.
func (b *sendBudget) admit(q *chargeRing) (charge, bool) {
	if q.empty() {
		return charge{}, false
	}
	c := q.peek()
	if !b.fits(c) {
		return charge{}, false
	}
	q.pop()
	b.take(c)
	return c, true
}

// chargeRing is a fixed-size FIFO of waiting chains.
type chargeRing struct {
	buf        []charge
	head, size int
}

func newChargeRing(n int) chargeRing { return chargeRing{buf: make([]charge, n)} }

func (r *chargeRing) empty() bool  { return r.size == 0 }
func (r *chargeRing) peek() charge { return r.buf[r.head] }
func (r *chargeRing) pop()         { r.head = (r.head + 1) % len(r.buf); r.size-- }
func (r *chargeRing) push(c charge) {
	if r.size == len(r.buf) {
		// Each request waits in one place at a time, and the ring holds
		// as many as there are requests.
		panic("rdma: more requests waiting for send credits than exist")
	}
	r.buf[(r.head+r.size)%len(r.buf)] = c
	r.size++
}
