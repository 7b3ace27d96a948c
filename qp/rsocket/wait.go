package rsocket

import (
	"context"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// A connection waits for its completion channel with two fdwait.Pollers,
// one per direction (res.rw, res.ww), so that Read and Write wait at once,
// each with its own deadline. Both watch the channel's fd, so one event
// wakes both; Wake reaches the one that kick, Close or a new deadline
// means. This is the package's only use of the completion channel's fd.
//
// By default they are in Netpoll mode: a parked Read or Write holds no OS
// thread, so that many connections need few. With Options.ThreadWait they
// are in Ppoll mode with the channel's fd registered: a parked call is one
// epoll_pwait2(2) on its thread, as C's blocking call is a read(2) on its
// own. Netpoll costs every park the scheduler's pass and, once the one P
// is idle, a wake-up of the runtime's monitor thread, which then polls
// every 20 us for a while. rstream -S 64 -C 1 -T b against C rstream on
// the -icount clock (one vCPU, 6.1), guest instructions per round trip of
// the Go client (the C client's: 45.4k, with 1 write, 1 ioctl, 1 read and
// 1 context switch): Netpoll 61.1k, with 1.48 futex, 1.47 epoll_pwait,
// 0.95 nanosleep (the monitor thread: 11.0k), 0.37 sched_yield and 3.45
// switches; ThreadWait 49.2k, with 0.86 epoll_pwait2 and 0.99 switches.
// Go/C time (medians of 3, two boots): 1.22 as client and 1.00-1.11 as
// server with Netpoll, 1.06 and 0.95 with ThreadWait.
//
// Before it parks, a Read or Write polls the CQ for Options.PollTime, as
// rsocket does for polling_time: a reply that comes by then costs no
// wake-up. A wake-up is what makes a parked call slow in the VM, under
// either mode and in C as well (TCG on the host's clock, 6.1, 2 vCPUs):
// a pipe written from another goroutine wakes a Netpoll wait in 65-112
// us and a Ppoll one in 115-127 (medians of 500); C rstream -T b, whose
// every call blocks in the channel's read, took 232-2784 us per 64-byte
// transfer where the non-blocking C tool, which never sleeps, took 40.

// newWaiter returns a Poller for one direction's waits: Netpoll, or with
// thread Ppoll on the registered channel fd (waitCompletions' waits are
// exactly that fd with context.Background, the registered path).
func (r *res) newWaiter(thread bool) (*fdwait.Poller, error) {
	if !thread {
		return fdwait.New(fdwait.Netpoll)
	}
	return fdwait.NewRegistered(r.ch.FD())
}

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
