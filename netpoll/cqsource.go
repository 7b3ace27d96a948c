package netpoll

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/cq"
)

// cqSource adapts a *cq.CQ to CompletionQueue.
type cqSource struct {
	cq      *cq.CQ
	wc      []cq.WC
	deliver func([]cq.WC)
}

// NewCQSource adapts c, which must have a completion channel of its own, for
// Driver.AddCQ. Each pass polls up to len(buf) completions at a time into buf
// and hands every batch to deliver, which must not keep the slice. Events are
// acknowledged as they are consumed, so c can be closed once the driver has
// reported the source closed.
func NewCQSource(c *cq.CQ, buf []cq.WC, deliver func([]cq.WC)) (CompletionQueue, error) {
	switch {
	case c == nil || deliver == nil:
		return nil, errors.New("netpoll: NewCQSource needs a CQ and a deliver function")
	case c.Channel() == nil:
		return nil, errors.New("netpoll: the CQ has no completion channel to park on")
	case len(buf) == 0:
		return nil, errors.New("netpoll: NewCQSource needs a non-empty completion buffer")
	}
	return &cqSource{cq: c, wc: buf, deliver: deliver}, nil
}

// Drain polls until the ring is empty.
func (s *cqSource) Drain() (int, error) {
	total := 0
	for {
		n, err := s.cq.Poll(s.wc)
		if n > 0 {
			s.deliver(s.wc[:n])
			total += n
		}
		if err != nil {
			return total, fmt.Errorf("netpoll: poll cq: %w", err)
		}
		if n < len(s.wc) {
			return total, nil
		}
	}
}

// Arm requests an event for the next completion of any kind.
func (s *cqSource) Arm() error { return s.cq.ReqNotify(false) }

// FD is the CQ's channel fd.
func (s *cqSource) FD() int { return s.cq.Channel().FD() }

// Consume reads every queued event and acknowledges it on the CQ it names.
func (s *cqSource) Consume() error {
	for {
		ev, err := s.cq.Channel().TryGetEvent()
		if errors.Is(err, cq.ErrNoEvent) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("netpoll: completion event: %w", err)
		}
		ev.Ack(1)
	}
}
