package rsocket

import (
	"context"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// A connection waits for its completion channel with two fdwait.Pollers
// in Netpoll mode, one per direction (res.rw, res.ww): a parked Read or
// Write holds no OS thread, so that many connections need few, and Read
// and Write wait at once, each with its own deadline. Both watch the
// channel's fd, so one event wakes both; Wake reaches the one that kick,
// Close or a new deadline means. This is the package's only use of the
// completion channel's fd. These are completion waits, where Ppoll wakes
// faster (see package fdwait), but a thread per parked Read would make
// 64 connections 64 threads.
//
// Before it parks, a Read or Write polls the CQ for Options.PollTime, as
// rsocket does for polling_time: a reply that comes by then costs no
// wake-up. A wake-up is what makes a parked call slow in the VM, under
// either mode and in C as well (TCG on the host's clock, 6.1, 2 vCPUs):
// a pipe written from another goroutine wakes a Netpoll wait in 65-112
// us and a Ppoll one in 115-127 (medians of 500); C rstream -T b, whose
// every call blocks in the channel's read, took 232-2784 us per 64-byte
// transfer where the non-blocking C tool, which never sleeps, took 40.

// newWaiter returns a Poller for one direction's waits.
func newWaiter() (*fdwait.Poller, error) { return fdwait.New(fdwait.Netpoll) }

// waitCompletions calls ready at first and whenever the completion channel
// may have an event, until it returns true. It returns fdwait.ErrWoken
// once w.Wake woke it, os.ErrDeadlineExceeded once deadline (zero: none)
// passes, and fdwait.ErrClosed once w is closed. ready must not block.
func (r *res) waitCompletions(w *fdwait.Poller, deadline time.Time, ready func() bool) error {
	for !ready() {
		if err := w.Wait(context.Background(), deadline, r.ch.FD()); err != nil {
			return err
		}
	}
	return nil
}

// waitCompletionsUnwoken is waitCompletions for a wait no Wake is meant
// to end (a control slot, the last sends in Close): a wake left for a
// Read or Write that was not parked, or a new deadline, lets it go on,
// with the deadline *deadline holds then. Called with c.mu held, which it
// releases while it waits.
func (c *Conn) waitCompletionsUnwoken(w *fdwait.Poller, deadline *time.Time, ready func() bool) error {
	for {
		dl := *deadline
		c.mu.Unlock()
		err := c.r.waitCompletions(w, dl, ready)
		c.mu.Lock()
		if err != fdwait.ErrWoken {
			return err
		}
	}
}

// poll is rsocket's polling before it blocks (rs_get_comp): with c.mu
// held, it processes completions until cond holds, Close has begun, or
// the poll time has passed (or *deadline, read at each pass, if sooner).
// It releases c.mu between passes, so that the other direction, a new
// deadline and Close get in; the caller looks at c.closed after it.
func (c *Conn) poll(cond func() bool, deadline *time.Time) {
	if c.r.poll <= 0 || cond() {
		return
	}
	end := time.Now().Add(c.r.poll)
	for {
		c.mu.Unlock()
		c.mu.Lock()
		if c.closed {
			return
		}
		c.progress()
		if cond() {
			return
		}
		now := time.Now()
		if !now.Before(end) || (!deadline.IsZero() && !now.Before(*deadline)) {
			return
		}
	}
}
