package main

import "fmt"

// Work request IDs, as in ibv_rc_pingpong: one receive and one send are
// ever awaited at a time, so the ID says which of them completed and doubles
// as its bit in pingpong.pending.
const (
	recvWRID = 1
	sendWRID = 2
)

// poster is what the ping-pong needs from the queue pair: both post the one
// message buffer.
type poster interface {
	// postRecv posts up to n receives and returns how many it posted.
	postRecv(n int) int
	// postSend posts one signalled send.
	postSend() error
}

// pingpong is the exchange's bookkeeping. Each side keeps rxDepth receives
// posted; a side sends its next message only once both its previous send
// and the peer's answer (a receive) have completed, so at most one message
// is in flight each way and a receive is always waiting for it.
type pingpong struct {
	q       poster
	iters   int
	rxDepth int
	scnt    int // sends completed
	rcnt    int // receives completed
	routs   int // receives posted and not yet completed
	pending int // recvWRID|sendWRID bits still awaited before the next send
	// onWarm, if set, is called once, when the warmUp-th receive completes.
	onWarm func()
	warmUp int
}

// fill posts the first rxDepth receives, before the peer can send.
func (p *pingpong) fill() error {
	p.routs = p.q.postRecv(p.rxDepth)
	if p.routs < p.rxDepth {
		return fmt.Errorf("Couldn't post receive (%d)", p.routs)
	}
	return nil
}

// start is called once the QP is connected. The client sends the first
// message; both then wait for a receive.
func (p *pingpong) start(client bool) error {
	p.pending = recvWRID
	if client {
		if err := p.q.postSend(); err != nil {
			return fmt.Errorf("Couldn't post send: %w", err)
		}
		p.pending |= sendWRID
	}
	return nil
}

// finished reports whether this side has sent and received iters messages.
func (p *pingpong) finished() bool { return p.rcnt >= p.iters && p.scnt >= p.iters }

// complete accounts for one successful completion. Receives are topped up
// to rxDepth when at most one is left, and the next send goes out when
// nothing is pending.
func (p *pingpong) complete(wrID uint64) error {
	switch wrID {
	case sendWRID:
		p.scnt++
	case recvWRID:
		if p.routs--; p.routs <= 1 {
			p.routs += p.q.postRecv(p.rxDepth - p.routs)
			if p.routs < p.rxDepth {
				return fmt.Errorf("Couldn't post receive (%d)", p.routs)
			}
		}
		p.rcnt++
		if p.rcnt == p.warmUp && p.onWarm != nil {
			p.onWarm()
		}
	default:
		return fmt.Errorf("Completion for unknown wr_id %d", int(wrID))
	}
	p.pending &^= int(wrID)
	if p.scnt < p.iters && p.pending == 0 {
		if err := p.q.postSend(); err != nil {
			return fmt.Errorf("Couldn't post send: %w", err)
		}
		p.pending = recvWRID | sendWRID
	}
	return nil
}
