package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/tools/internal/eventlook"
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
	// looks are when each kind of wait looks for a queued event first.
	looks [2]eventlook.Look
}

// waitKind is what a wait is for (see package eventlook).
type waitKind int

const (
	forSend waitKind = iota // a work request's completion (RDMA READ's too)
	forRecv                 // a message from the peer
)

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
// re-arms that CQ, which it returns; k is what it waits for.
func (w *eventWaiter) wait(k waitKind) (*cq.CQ, error) {
	c := w.looks[k].Queued(w.ch)
	for c == nil {
		if err := w.sleep(); err != nil {
			return nil, err
		}
		var err error
		switch c, err = w.ch.TryGetEvent(); {
		case err == cq.ErrNoEvent:
			// Readable, but the event is gone: sleep again, with the
			// stall limit.
		case err != nil:
			return nil, fmt.Errorf("Failed to get cq_event: %w", err)
		}
	}
	c.Ack(1)
	if err := c.ReqNotify(false); err != nil {
		return nil, fmt.Errorf("Couldn't request CQ notification: %w", err)
	}
	return c, nil
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
