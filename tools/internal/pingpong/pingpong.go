package pingpong

import "fmt"

// Work request IDs, as in ibv_rc_pingpong: one receive and one send are
// ever awaited at a time, so the ID says which of them completed and doubles
// as its bit in Pingpong.pending.
const (
	RecvWRID = 1
	SendWRID = 2
)

// Poster is what the ping-pong needs from the queue pair: both post the one
// message buffer.
type Poster interface {
	// PostRecv posts up to n receives and returns how many it posted.
	PostRecv(n int) int
	// PostSend posts one signalled send.
	PostSend() error
}

// Pingpong is the exchange's bookkeeping. Each side keeps RxDepth receives
// posted; a side sends its next message only once both its previous send
// and the peer's answer (a receive) have completed, so at most one message
// is in flight each way and a receive is always waiting for it.
type Pingpong struct {
	Q       Poster
	Iters   int
	RxDepth int
	scnt    int // sends completed
	rcnt    int // receives completed
	routs   int // receives posted and not yet completed
	pending int // RecvWRID|SendWRID bits still awaited before the next send
	// OnWarm, if set, is called once, when the WarmUp-th receive completes
	// (rc-pingpong starts counting the loop's allocations there).
	OnWarm func()
	WarmUp int
}

// Fill posts the first RxDepth receives, before the peer can send.
func (p *Pingpong) Fill() error {
	p.routs = p.Q.PostRecv(p.RxDepth)
	if p.routs < p.RxDepth {
		return fmt.Errorf("Couldn't post receive (%d)", p.routs)
	}
	return nil
}

// Start is called once the QP is connected. The client sends the first
// message; both then wait for a receive.
func (p *Pingpong) Start(client bool) error {
	p.pending = RecvWRID
	if client {
		if err := p.Q.PostSend(); err != nil {
			return fmt.Errorf("Couldn't post send: %w", err)
		}
		p.pending |= SendWRID
	}
	return nil
}

// Finished reports whether this side has sent and received Iters messages.
func (p *Pingpong) Finished() bool { return p.rcnt >= p.Iters && p.scnt >= p.Iters }

// Received is the number of receives completed so far.
func (p *Pingpong) Received() int { return p.rcnt }

// Complete accounts for one successful completion. Receives are topped up
// to rxDepth when at most one is left, and the next send goes out when
// nothing is pending.
func (p *Pingpong) Complete(wrID uint64) error {
	switch wrID {
	case SendWRID:
		p.scnt++
	case RecvWRID:
		if p.routs--; p.routs <= 1 {
			p.routs += p.Q.PostRecv(p.RxDepth - p.routs)
			if p.routs < p.RxDepth {
				return fmt.Errorf("Couldn't post receive (%d)", p.routs)
			}
		}
		p.rcnt++
		if p.rcnt == p.WarmUp && p.OnWarm != nil {
			p.OnWarm()
		}
	default:
		return fmt.Errorf("Completion for unknown wr_id %d", int(wrID))
	}
	p.pending &^= int(wrID)
	if p.scnt < p.Iters && p.pending == 0 {
		if err := p.Q.PostSend(); err != nil {
			return fmt.Errorf("Couldn't post send: %w", err)
		}
		p.pending = RecvWRID | SendWRID
	}
	return nil
}
