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
	deadline sleepDeadline
}

// sleepDeadline is the deadline of the sleeps, set afresh only every
// sleepsPerDeadline sleeps from epoch's monotonic clock (one clock
// reading; time.Now takes two, the wall clock's too): a reading is a
// tenth of a short sleep's instructions outside the kernel. A sleep that
// reaches a deadline set sleeps ago renews it and sleeps again, so a
// stall is reported after stallLimit at least and twice that at most.
type sleepDeadline struct {
	at   time.Time
	uses int
}

// sleepsPerDeadline is how many sleeps share one deadline.
const sleepsPerDeadline = 64

// next returns the deadline for a sleep, and whether it was set for it.
func (d *sleepDeadline) next(clock func() int64) (deadline time.Time, fresh bool) {
	if d.uses%sleepsPerDeadline == 0 {
		return d.renew(clock), true
	}
	d.uses++
	return d.at, false
}

// renew sets the deadline stallLimit after now, for this sleep and the
// next ones.
func (d *sleepDeadline) renew(clock func() int64) time.Time {
	d.at = epoch.Add(time.Duration(clock()) + stallLimit)
	d.uses = 1
	return d.at
}

// waitKind is what a wait is for (see package eventlook).
type waitKind int

const (
	forSend waitKind = iota // a work request's completion (RDMA READ's too)
	forRecv                 // a message from the peer
)

func newEventWaiter(ch *cq.Channel) (*eventWaiter, error) {
	p, err := fdwait.New(fdwait.Ppoll)
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

// sleep waits until the channel's fd is readable. With no event it fails
// with errStall after stallLimit, or up to twice that (see sleepDeadline).
func (w *eventWaiter) sleep() error {
	deadline, fresh := w.deadline.next(now)
	err := w.p.Wait(context.Background(), deadline, w.ch.FD())
	if !fresh && errors.Is(err, os.ErrDeadlineExceeded) {
		err = w.p.Wait(context.Background(), w.deadline.renew(now), w.ch.FD())
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w event for %v", errStall, stallLimit)
	default:
		return fmt.Errorf("Failed to get cq_event: wait on completion channel: %w", err)
	}
}
