package fabrics

// QueueTransport is what a transport provides for one queue pair.
type QueueTransport interface {
	// Complete sends r's response, after its data for DirCtrlToHost
	// commands that succeeded. Called only on the queue's poller goroutine;
	// the transport reuses r once the response is on its way.
	Complete(r *Request)
	// Wake makes the poller call Queue.Reap soon. Called from any
	// goroutine; must not block.
	Wake()
	// Disconnect tears the queue pair down, as on a fatal controller
	// error or keep-alive expiry. Called from any goroutine.
	Disconnect()
	// Peer is the host's address, for logs.
	Peer() string
	// TRType is the transport's TRTYPE (nvme.TransportRDMA,
	// nvme.TransportTCP): what Identify and the error log answer.
	TRType() uint8
}

// EventFDer is implemented by transports whose poller sleeps on an eventfd
// (the one Wake writes): a queue's io_uring signals its completions there
// directly. For other transports the ring gets an eventfd of its own and a
// goroutine that turns it into Wake calls.
type EventFDer interface {
	EventFD() int
}

// RequestCounter is implemented by transports that admit more commands
// than the queue's depth (a response may still be in flight when the
// host's next command lands): Requests is how many a queue pair may have
// at once, so that fabrics has room for all of them.
type RequestCounter interface {
	Requests() int
}
