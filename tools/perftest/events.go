package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/tools/internal/eventlook"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// eventWaiter is -e's wait for a completion event (ctx_notify_events),
// bounded by stallLimit: a peer that stops sending, or runs with other
// parameters, ends the run with an error instead of a wait for ever (C
// perftest waits for ever). It sleeps on the channel's fd with an
// fdwait.Poller, then takes the queued event; a cancellable context for
// GetEvent would do the same, but its first wait registers the context
// (an allocation inside the measured loop).
//
// A sleep has no timeout: a timeout is a kernel timer armed and cancelled
// every sleep, and the clock read to set it (400 instructions of a
// ppoll on 6.12, where every wait sleeps). A watchdog ends a sleep that
// lasts instead.
type eventWaiter struct {
	ch *cq.Channel
	p  *fdwait.Poller
	// looks are when each kind of wait looks for a queued event first.
	looks [2]eventlook.Look
	dog   *sleepWatchdog
}

// sleepWatchdog ends a sleep that lasts: a goroutine ticking every
// period wakes the Poller when the sleep in progress is the one it saw at
// its last tick. A sleep so ends after one to two periods, and costs two
// atomic additions.
type sleepWatchdog struct {
	p      *fdwait.Poller
	sleeps atomic.Uint64 // twice the sleeps begun, plus 1 during one
	fired  atomic.Bool   // the watchdog woke the Poller
	done   chan struct{}
	once   sync.Once
}

func newSleepWatchdog(p *fdwait.Poller, period time.Duration) *sleepWatchdog {
	d := &sleepWatchdog{p: p, done: make(chan struct{})}
	go d.watch(period)
	return d
}

func (d *sleepWatchdog) watch(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	seen := uint64(0)
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		s := d.sleeps.Load()
		if s%2 == 1 && s == seen {
			d.fired.Store(true)
			d.p.Wake()
			return
		}
		seen = s
	}
}

func (d *sleepWatchdog) begin() { d.sleeps.Add(1) }
func (d *sleepWatchdog) end()   { d.sleeps.Add(1) }

// stop ends the watch; idempotent.
func (d *sleepWatchdog) stop() { d.once.Do(func() { close(d.done) }) }

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
	return &eventWaiter{ch: ch, p: p, dog: newSleepWatchdog(p, stallLimit)}, nil
}

// Close stops the watchdog and releases the waiter's Poller.
func (w *eventWaiter) Close() error {
	w.dog.stop()
	return w.p.Close()
}

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
// with errStall after stallLimit, or up to twice that (see
// sleepWatchdog).
func (w *eventWaiter) sleep() error {
	w.dog.begin()
	err := w.p.Wait(context.Background(), time.Time{}, w.ch.FD())
	w.dog.end()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fdwait.ErrWoken) && w.dog.fired.Load():
		return fmt.Errorf("%w event for %v", errStall, stallLimit)
	default:
		return fmt.Errorf("Failed to get cq_event: wait on completion channel: %w", err)
	}
}
