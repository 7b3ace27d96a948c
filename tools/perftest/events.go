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
	// looks keeps, per kind of wait, how often queued looks (see look).
	looks [2]look
}

// waitKind is what a wait is for. The two kinds find their events queued
// or not apart: in a SEND ping-pong the send's completion is queued by the
// time its doorbell write returns, the peer's message is not.
type waitKind int

const (
	forSend waitKind = iota // a work request's completion (RDMA READ's too)
	forRecv                 // a message from the peer
)

// look is when a kind of wait next looks for a queued event: skip is how
// many waits go without a look after the last one found none, and left
// how many of them remain.
type look struct{ skip, left int }

// maxSkip bounds skip, which doubles with every look that finds nothing:
// a loop whose events come while it sleeps soon looks once in maxSkip
// waits, and one whose events are queued (again) is back to looking on
// every wait at its first hit.
const maxSkip = 64

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
	c := w.queued(&w.looks[k])
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
// while the loop sleeps the look is a read more, so looks that find nothing
// grow rarer (see look). Its error is left to the wait that follows, which
// meets it again and reports it.
func (w *eventWaiter) queued(l *look) *cq.CQ {
	if !l.due() {
		return nil
	}
	c, _ := w.ch.TryGetEvent()
	l.saw(c != nil)
	return c
}

// due says whether this wait looks for a queued event.
func (l *look) due() bool {
	if l.left > 0 {
		l.left--
		return false
	}
	return true
}

// saw records whether a look found an event: a hit makes every wait look
// again, a miss doubles the waits that skip the look, up to maxSkip.
func (l *look) saw(hit bool) {
	if hit {
		l.skip = 0
		return
	}
	l.skip = min(max(2*l.skip, 1), maxSkip)
	l.left = l.skip
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
