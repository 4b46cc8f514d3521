package fabrics

// SQSize is the submission queue size the host connected the queue with
// (1-based, Connect's SQSIZE + 1), or 0 before Connect. Transports that
// count the host's commands bound them by it.
func (q *Queue) SQSize() int { return int(q.sqsize) }
