package fdwait_test

import (
	"context"
	"errors"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// A socket-style reader waits for its completion channel until a deadline
// of its own (SetReadDeadline), without a context per call: TryGetEvent
// first, then a Poller wait on the channel's fd. Close of the Poller (the
// socket's Close) ends every such wait with fdwait.ErrClosed.
func Example_completionChannelDeadline() {
	var (
		ch       *cq.Channel    // the socket's completion channel
		p        *fdwait.Poller // the socket's, from fdwait.New
		deadline time.Time      // the socket's read deadline; zero: none
	)
	nextCQ := func(ctx context.Context) (*cq.CQ, error) {
		for {
			c, err := ch.TryGetEvent()
			if !errors.Is(err, cq.ErrNoEvent) {
				return c, err // acknowledge with c.Ack(1), re-arm, poll
			}
			// os.ErrDeadlineExceeded once the deadline passed, ctx.Err(),
			// fdwait.ErrClosed after p.Close.
			if err := p.Wait(ctx, deadline, ch.FD()); err != nil {
				return nil, err
			}
		}
	}
	_ = nextCQ
}
