package main

import (
	"context"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/cq"
)

// eventWaiter is -e's wait for a completion event (ctx_notify_events),
// bounded by stallLimit: a peer that stops sending, or runs with other
// parameters, ends the run with an error instead of a wait for ever (C
// perftest waits for ever). It sleeps in poll(2) on the channel's fd with
// a timeout and then takes the queued event; a cancellable context for
// GetEvent would do the same, but its first wait registers the context
// (an allocation inside the measured loop).
type eventWaiter struct {
	ch        *cq.Channel
	lastYield int64
}

func newEventWaiter(ch *cq.Channel) *eventWaiter { return &eventWaiter{ch: ch} }

// wait sleeps until a CQ of the channel has an event, acknowledges it and
// re-arms that CQ, which it returns.
func (w *eventWaiter) wait() (*cq.CQ, error) {
	if err := w.sleep(); err != nil {
		return nil, err
	}
	// Queued: GetEvent reads it at once. (TryGetEvent first would save the
	// poll when one is queued already, but telling its ErrNoEvent apart
	// takes errors.Is, whose type-assertion cache may grow on that error's
	// type inside the measured loop: an allocation, seen in 3 runs of 8.)
	c, err := w.ch.GetEvent(context.Background())
	if err != nil {
		return nil, fmt.Errorf("Failed to get cq_event: %w", err)
	}
	c.Ack(1)
	if err := c.ReqNotify(false); err != nil {
		return nil, fmt.Errorf("Couldn't request CQ notification: %w", err)
	}
	return c, nil
}

// sleep waits until the channel's fd is readable, at most stallLimit. Like
// cq.Channel.GetEvent it yields to the scheduler first when 2 ms have
// passed since it last did, so that the runtime does not take this
// thread's P in the middle of every wait.
func (w *eventWaiter) sleep() error {
	if t := now(); t-w.lastYield >= int64(yieldEvery) {
		w.lastYield = t
		runtime.Gosched()
	}
	ts := unix.NsecToTimespec(int64(stallLimit))
	for {
		fds := [1]unix.PollFd{{Fd: int32(w.ch.FD()), Events: unix.POLLIN}}
		n, err := unix.Ppoll(fds[:], &ts, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("Failed to get cq_event: poll completion channel: %w", err)
		case n == 0:
			return fmt.Errorf("%w event for %v", errStall, stallLimit)
		}
		return nil
	}
}
