package rsocket

import (
	"time"

	"github.com/pureverbs/pureverbs/qp"
)

// startKeepalive sends rsocket's keepalive, an empty RDMA WRITE (no
// immediate: the peer's application sees nothing), every period, in a
// control slot. A peer that is gone then fails the write after the
// transport's retries, and the connection with it.
func (c *Conn) startKeepalive(period time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.alive = time.AfterFunc(period, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed || c.state&stConnected == 0 {
			return
		}
		c.progress()
		if c.ctrlSeq != c.ctrlMax {
			msg := message(opCtrl, ctrlKeepalive)
			c.swr[0] = qp.SendWR{ID: uint64(msg), Opcode: qp.RDMAWrite, Flags: qp.Signaled,
				RemoteAddr: c.remoteSGL.Addr, RKey: c.remoteSGL.Key}
			if err := c.r.q.PostSend(c.swr[:]); err != nil {
				c.fail(err)
				return
			}
			c.ctrlSeq++
		}
		c.alive.Reset(period)
	})
}
