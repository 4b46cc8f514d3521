package rdmahost

import "time"

// WaitSent waits until every capsule posted so far is acknowledged,
// waiting up to timeout for each. On a reliable connection the target's
// device acknowledges a send once it took a receive for it and completed
// it: the target's receive completions are in its completion queue, polled
// or not.
func (cn *Conn) WaitSent(timeout time.Duration) error {
	for cn.sending > 0 {
		if err := cn.reap(timeout, false); err != nil {
			return err
		}
	}
	return nil
}
