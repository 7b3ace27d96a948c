// Package fdwait is the one way pureverbs waits for a kernel fd to become
// readable: Poller.Wait takes a few non-blocking fds (a completion
// channel, a Context's async event fd) and returns when one of them is
// readable, when Wake is called, when a context is done, when a deadline
// passes, or when the Poller is closed, whichever comes first. Close wakes
// every waiter and returns once they have left, so that the fds they
// watched may be closed right after it.
//
// A wait is one ppoll(2) over the fds and the Poller's eventfds: one that
// Close and Wake write (Close's count is never taken back) and, for a
// context that can be cancelled, one that a context.AfterFunc writes. The last stays registered with its context
// after the wait, so that a loop waiting again and again with one context
// registers it once, and a wait allocates nothing. Every 2 ms of waiting
// the waiter yields to the Go scheduler once (see Wait). A wait occupies
// its OS thread, which is what keeps the wake-up latency of a completion
// at that of C's ibv_get_cq_event; a program that waits on many fds at
// once should put them into one epoll set of its own instead.
//
// Deadlines: Wait(ctx, deadline) takes both a context and an absolute
// deadline (the zero time for none): a socket-style caller (SetDeadline)
// passes its deadline without making a context per call, and gets
// os.ErrDeadlineExceeded when it passes.
//
//	for {
//		if ev, ok := tryRead(); ok { // non-blocking read of the fd
//			return ev, nil
//		}
//		if err := p.Wait(ctx, deadline, fd); err != nil {
//			return nil, err // ctx.Err(), os.ErrDeadlineExceeded, ErrClosed
//		}
//	}
//
// The package sits under uverbs, and imports nothing of pureverbs but the
// leak check, so that uverbs, cq, qp/rdmacm and server all may use it.
package fdwait

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// MaxFDs is the most fds one Wait watches.
const MaxFDs = 2

// ErrClosed is what Wait returns once Close has begun. It is net.ErrClosed,
// the one "closed" value of every pureverbs package (uverbs.ErrClosed).
var ErrClosed = net.ErrClosed

// ErrWoken is what Wait returns when Wake woke it.
var ErrWoken = errors.New("fdwait: woken")

// yieldEvery is how long a goroutine may go on waiting, wait after wait,
// without passing through the scheduler; see Wait.
const yieldEvery = 2 * time.Millisecond

// epoch is the origin of Poller.yielded: a monotonic clock reading.
var epoch = time.Now()

// one is the 8-byte count 1, what a write to an eventfd adds.
var one = [8]byte{1}

// Poller waits for its fds; safe for concurrent use.
type Poller struct {
	// waiters is read-held by every Wait; Close takes it for writing,
	// after signalling closeFD, so that no eventfd is closed under a
	// poll.
	waiters sync.RWMutex
	closing atomic.Bool
	closed  bool
	// evfd is the eventfd Wake and Close write. Close sets closing first
	// and its count is never taken back: whoever drains the fd and then
	// finds closing set writes it again (see clearWake).
	evfd  int
	watch leakcheck.Watch

	// yielded is when a Wait last went through the scheduler, in
	// nanoseconds since epoch.
	yielded atomic.Int64
	// spare is a cancellation eventfd kept for the next Wait with a
	// cancellable context, so that such a wait creates none.
	spare atomic.Pointer[waker]
	// armed keeps the last cancellable Wait's waker registered with its
	// context (see arm); shared with the GC cleanup.
	armed *armedSlot
}

// armedSlot holds at most one waker registered with a context.
type armedSlot struct{ p atomic.Pointer[armedWaker] }

// armedWaker is a waker registered (context.AfterFunc) with the contexts
// whose Done channel is done: it fires when they are done.
type armedWaker struct {
	done <-chan struct{}
	w    *waker
	stop func() bool
}

// pollerRes is what a dropped Poller's cleanup releases.
type pollerRes struct {
	evfd  int
	armed *armedSlot
}

// New returns a Poller.
func New() (*Poller, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("fdwait: eventfd: %w", err)
	}
	p := &Poller{evfd: efd, armed: new(armedSlot)}
	// A dropped Poller's eventfds are closed, and its armed waker taken
	// off its context: a context that is never done would keep it alive.
	p.watch = leakcheck.Object(p, "fdwait.Poller eventfd", func(r pollerRes) {
		unix.Close(r.evfd)
		if a := r.armed.p.Swap(nil); a != nil {
			a.w.unregister(a.stop)
			a.w.close()
		}
	}, pollerRes{efd, p.armed})
	return p, nil
}

// FDError is a watched fd that poll reported failed (POLLERR, POLLNVAL)
// rather than readable.
type FDError struct {
	FD      int
	Revents int16
}

func (e *FDError) Error() string {
	return fmt.Sprintf("fdwait: fd %d failed (revents %#x)", e.FD, e.Revents)
}

// Wait blocks until one of fds (at most MaxFDs, which stay the caller's:
// Wait never reads or closes them) is readable (it returns nil;
// the caller then reads it, and waits again if another reader was first),
// Wake is called (ErrWoken), ctx is done (ctx.Err()), deadline passes
// (os.ErrDeadlineExceeded; the zero time is no deadline), or Close has
// begun (ErrClosed). A watched fd that failed is an *FDError. A deadline
// already past still looks at the fds once, without blocking. Wait
// allocates nothing once a cancellable ctx is registered.
//
// Every 2 ms of waiting it yields to the Go scheduler once: a goroutine
// whose waits are system calls never passes through the scheduler, so its
// P keeps one scheduling tick, and after 10 ms of that the runtime's
// monitor thread takes the P away mid-wait and then polls every 20 us for
// a while, in case it must do so again. Under rxe those wake-ups take CPU
// from the kernel's packet processing and the peer: a 64-byte rc-pingpong
// -e pair ran at 1.24-1.55x C's time without the yield and 1.04-1.12x
// with it (integration.TestEventWaitWakeups). Yielding on every wait costs
// another thread's wake-up each time, so the yield is rationed.
func (p *Poller) Wait(ctx context.Context, deadline time.Time, fds ...int) error {
	if len(fds) > MaxFDs {
		return fmt.Errorf("fdwait: wait on %d fds, at most %d: %w", len(fds), MaxFDs, unix.EINVAL)
	}
	p.waiters.RLock()
	defer p.waiters.RUnlock()
	if p.closing.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	cancelFD := int32(-1) // poll ignores a negative fd
	if done := ctx.Done(); done != nil {
		a, err := p.arm(ctx, done)
		if err != nil {
			return err
		}
		defer p.keepArmed(ctx, a)
		cancelFD = int32(a.w.fd)
	}
	p.yieldBeforeWait()
	for {
		var ts *unix.Timespec
		var left unix.Timespec
		if !deadline.IsZero() {
			d := max(time.Until(deadline), 0)
			left = unix.NsecToTimespec(int64(d))
			ts = &left
		}
		// The caller's fds first, then Close's and Wake's, then the
		// context's.
		var pfds [MaxFDs + 2]unix.PollFd
		for i, fd := range fds {
			pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		n := len(fds)
		pfds[n] = unix.PollFd{Fd: int32(p.evfd), Events: unix.POLLIN}
		pfds[n+1] = unix.PollFd{Fd: cancelFD, Events: unix.POLLIN}
		ready, err := unix.Ppoll(pfds[:n+2], ts, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("fdwait: poll: %w", err)
		}
		switch {
		case pfds[n].Revents != 0:
			if p.closing.Load() || p.clearWake() {
				return ErrClosed
			}
			return ErrWoken
		case pfds[n+1].Revents != 0:
			return ctx.Err() // the waker is this wait's own
		}
		for i := range n {
			if r := pfds[i].Revents; r&(unix.POLLERR|unix.POLLNVAL) != 0 {
				if p.closing.Load() {
					return ErrClosed
				}
				return &FDError{FD: fds[i], Revents: r}
			}
		}
		if ready > 0 {
			return nil
		}
		if ts != nil {
			return os.ErrDeadlineExceeded
		}
	}
}

// Wake makes one Wait in progress, or the next one, return ErrWoken. Wakes
// that come before a Wait takes them count as one. After Close it returns
// ErrClosed.
func (p *Poller) Wake() error {
	p.waiters.RLock()
	defer p.waiters.RUnlock()
	if p.closed {
		return ErrClosed
	}
	unix.Write(p.evfd, one[:])
	return nil
}

// ClearWake takes back the wakes no Wait has taken yet, so that the next
// Wait blocks: for a caller that learnt by other means that it was woken.
func (p *Poller) ClearWake() {
	p.waiters.RLock()
	defer p.waiters.RUnlock()
	if !p.closed {
		p.clearWake()
	}
}

// clearWake drains the eventfd with the Poller held open. It reports
// whether Close has begun; then it has put Close's count back, in case it
// took it, so that every other Wait still wakes.
func (p *Poller) clearWake() (closing bool) {
	var n [8]byte
	unix.Read(p.evfd, n[:])
	if p.closing.Load() {
		unix.Write(p.evfd, one[:])
		return true
	}
	return false
}

// Close wakes every Wait with ErrClosed, waits for them to return and
// releases the Poller's eventfds; the watched fds are the caller's to
// close, which it may do once Close returns. Idempotent.
func (p *Poller) Close() error {
	if !p.closing.Swap(true) {
		// Any non-zero count makes the eventfd readable; it is never
		// taken back for good (see clearWake), so it wakes every Wait.
		unix.Write(p.evfd, one[:])
	}
	p.waiters.Lock()
	defer p.waiters.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.watch.Closed()
	unix.Close(p.evfd)
	if a := p.armed.p.Swap(nil); a != nil {
		a.w.unregister(a.stop)
		a.w.close()
	}
	if w := p.spare.Swap(nil); w != nil {
		w.close()
	}
	return nil
}

// yieldBeforeWait calls runtime.Gosched when the last yield is more than
// yieldEvery ago; see Wait.
func (p *Poller) yieldBeforeWait() {
	now := int64(time.Since(epoch))
	if now-p.yielded.Load() < int64(yieldEvery) {
		return
	}
	p.yielded.Store(now)
	runtime.Gosched()
}

// waker is an eventfd that a context.AfterFunc writes once ctx is done; a
// Wait polls it next to the watched fds.
type waker struct {
	fd    int
	fire  func() // w.write, bound once
	watch leakcheck.Watch
}

func (w *waker) write() { unix.Write(w.fd, one[:]) }

// getWaker takes the Poller's spare waker, or makes one.
func (p *Poller) getWaker() (*waker, error) {
	if w := p.spare.Swap(nil); w != nil {
		return w, nil
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("fdwait: eventfd: %w", err)
	}
	w := &waker{fd: fd}
	w.fire = w.write
	w.watch = leakcheck.Object(w, "fdwait.Poller cancellation eventfd", func(fd int) { unix.Close(fd) }, fd)
	return w, nil
}

// arm returns a waker registered with ctx, whose Done channel is done: the
// armed one when it was registered with a context of the same Done channel
// (a loop waiting with one context registers it once), otherwise a new
// registration, releasing the armed one. The caller owns it until
// keepArmed.
func (p *Poller) arm(ctx context.Context, done <-chan struct{}) (*armedWaker, error) {
	a := p.armed.p.Swap(nil)
	if a != nil && a.done == done {
		return a, nil
	}
	if a != nil {
		p.putWaker(a.w, a.stop)
	}
	w, err := p.getWaker()
	if err != nil {
		return nil, err
	}
	return &armedWaker{done: done, w: w, stop: context.AfterFunc(ctx, w.fire)}, nil
}

// keepArmed leaves a registered for the next Wait with the same context,
// unless the context is done (its waker has fired), the Poller is
// closing, or another waiter left one first: then it releases a.
func (p *Poller) keepArmed(ctx context.Context, a *armedWaker) {
	if ctx.Err() != nil || p.closing.Load() || !p.armed.p.CompareAndSwap(nil, a) {
		p.putWaker(a.w, a.stop)
	}
}

// putWaker unregisters w from its context and keeps it as the spare, or
// closes it when there is one already or the Poller is closing.
func (p *Poller) putWaker(w *waker, stop func() bool) {
	w.unregister(stop)
	if p.closing.Load() || !p.spare.CompareAndSwap(nil, w) {
		w.close()
	}
}

// unregister stops w's AfterFunc. If it already started, it waits for its
// write (so that no write can reach the fd once reused or closed) and
// drains the count.
func (w *waker) unregister(stop func() bool) {
	if stop() {
		return
	}
	fds := [1]unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	for {
		var n [8]byte
		if _, err := unix.Read(w.fd, n[:]); err == nil {
			return
		}
		unix.Ppoll(fds[:], nil, nil)
	}
}

func (w *waker) close() {
	w.watch.Closed()
	unix.Close(w.fd)
}
