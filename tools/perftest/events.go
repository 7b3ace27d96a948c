package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// eventWaiter is -e's wait for a completion event (ctx_notify_events),
// bounded by stallLimit: a peer that stops sending, or runs with other
// parameters, ends the run with an error instead of a wait for ever (C
// perftest waits for ever). It waits for the channel's fd with an
// fdwait.Poller until a deadline, then takes the queued event; a
// cancellable context for GetEvent would do the same, but its first wait
// registers the context (an allocation inside the measured loop).
type eventWaiter struct {
	ch *cq.Channel
	p  *fdwait.Poller
	// misses counts the waits since a look for a queued event found none.
	misses int
}

// probeEvery is how often, while looks for a queued event find none, a
// wait looks all the same, to notice that events have started to queue.
const probeEvery = 8

func newEventWaiter(ch *cq.Channel) (*eventWaiter, error) {
	// The measured path, as cq.Channel's: sleep's wait is one
	// epoll_pwait2 on a set built once.
	p, err := fdwait.NewRegistered(ch.FD())
	if err != nil {
		return nil, fmt.Errorf("Couldn't create completion channel: %w", err)
	}
	return &eventWaiter{ch: ch, p: p}, nil
}

// Close releases the waiter's Poller.
func (w *eventWaiter) Close() error { return w.p.Close() }

// wait sleeps until a CQ of the channel has an event, acknowledges it and
// re-arms that CQ, which it returns.
func (w *eventWaiter) wait() (*cq.CQ, error) {
	c := w.queued()
	if c == nil {
		if err := w.sleep(); err != nil {
			return nil, err
		}
		// Queued: GetEvent reads it at once. (Its error, unlike
		// TryGetEvent's, needs no errors.Is here, whose type-assertion
		// cache may grow on the error's type inside the measured loop:
		// an allocation, seen in 3 runs of 8.)
		var err error
		if c, err = w.ch.GetEvent(context.Background()); err != nil {
			return nil, fmt.Errorf("Failed to get cq_event: %w", err)
		}
	}
	c.Ack(1)
	if err := c.ReqNotify(false); err != nil {
		return nil, fmt.Errorf("Couldn't request CQ notification: %w", err)
	}
	return c, nil
}

// queued takes an event already queued, as C's blocking read does at once:
// then the wait is that one read, not a sleep and a read. Where events come
// while the loop sleeps (a SEND ping-pong's) the look would be a read more,
// so after a miss it looks only on every probeEvery-th wait. Its error is
// left to the wait that follows, which meets it again and reports it.
func (w *eventWaiter) queued() *cq.CQ {
	if w.misses%probeEvery != 0 {
		w.misses++
		return nil
	}
	if c, _ := w.ch.TryGetEvent(); c != nil {
		w.misses = 0
		return c
	}
	w.misses++
	return nil
}

// sleep waits until the channel's fd is readable, at most stallLimit.
func (w *eventWaiter) sleep() error {
	switch err := w.p.Wait(context.Background(), time.Now().Add(stallLimit), w.ch.FD()); {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w event for %v", errStall, stallLimit)
	default:
		return fmt.Errorf("Failed to get cq_event: wait on completion channel: %w", err)
	}
}
