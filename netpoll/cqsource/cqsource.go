// Package cqsource adapts a completion queue of package cq to
// netpoll.CompletionQueue, so a netpoll.Driver can poll it.
//
// It lives apart from netpoll so that a program polling only sockets does not
// link the verbs packages: the dependency points from this package to both
// netpoll and cq, never from netpoll to cq.
package cqsource

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/netpoll"
)

// Source is a *cq.CQ as a netpoll.CompletionQueue. Add it with
// Driver.AddCQ; the driver calls its methods on the loop's goroutine only.
type Source struct {
	cq      *cq.CQ
	wc      []cq.WC
	deliver func([]cq.WC)
}

var _ netpoll.CompletionQueue = (*Source)(nil)

// New adapts c, which must have a completion channel of its own. Each pass
// polls up to len(buf) completions at a time into buf and hands every batch
// to deliver, which must not keep the slice. Events are acknowledged as they
// are consumed, so c can be closed once the driver has reported the source
// closed.
func New(c *cq.CQ, buf []cq.WC, deliver func([]cq.WC)) (*Source, error) {
	switch {
	case c == nil || deliver == nil:
		return nil, errors.New("cqsource: New needs a CQ and a deliver function")
	case c.Channel() == nil:
		return nil, errors.New("cqsource: the CQ has no completion channel to park on")
	case len(buf) == 0:
		return nil, errors.New("cqsource: New needs a non-empty completion buffer")
	}
	return &Source{cq: c, wc: buf, deliver: deliver}, nil
}

// Drain polls until the ring is empty and returns how many completions it
// delivered.
func (s *Source) Drain() (int, error) {
	total := 0
	for {
		n, err := s.cq.Poll(s.wc)
		if n > 0 {
			s.deliver(s.wc[:n])
			total += n
		}
		if err != nil {
			return total, fmt.Errorf("cqsource: poll cq: %w", err)
		}
		if n < len(s.wc) {
			return total, nil
		}
	}
}

// Arm requests an event for the next completion of any kind.
func (s *Source) Arm() error { return s.cq.ReqNotify(false) }

// FD is the CQ's channel descriptor.
func (s *Source) FD() int { return s.cq.Channel().FD() }

// Consume reads every queued event and acknowledges it on the CQ it names.
func (s *Source) Consume() error {
	for {
		ev, err := s.cq.Channel().TryGetEvent()
		if errors.Is(err, cq.ErrNoEvent) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cqsource: completion event: %w", err)
		}
		ev.Ack(1)
	}
}
