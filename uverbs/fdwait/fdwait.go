// Package fdwait is the one way pureverbs waits for a kernel fd to become
// readable: Poller.Wait takes a few non-blocking fds (a completion
// channel, a Context's async event fd, the RDMA CM channel) and returns
// when one of them is readable, when Wake is called, when a context is
// done, when a deadline passes, or when the Poller is closed, whichever
// comes first. Close wakes every waiter and returns once they have left,
// so that the fds they watched may be closed right after it.
//
//	for {
//		if ev, ok := tryRead(); ok { // non-blocking read of the fd
//			return ev, nil
//		}
//		if err := p.Wait(ctx, deadline, fd); err != nil {
//			return nil, err // ctx.Err(), os.ErrDeadlineExceeded, ErrClosed, ErrWoken
//		}
//	}
//
// Deadlines: Wait(ctx, deadline) takes both a context and an absolute
// deadline (the zero time for none): a socket-style caller (SetDeadline)
// passes its deadline without making a context per call, and gets
// os.ErrDeadlineExceeded when it passes.
//
// # Two ways to block
//
// A Poller blocks in one of two ways, chosen once by New's Mode; Wait,
// Wake and Close mean the same under both.
//
// Ppoll: a wait is one ppoll(2) over the fds and the Poller's eventfds, on
// the waiting goroutine's OS thread, which the wait occupies. Its wake-up
// is the kernel's alone, as for C's blocking read of a completion channel.
// A wait on fds given to Register is one epoll_pwait2(2) instead (see
// Registered waits).
//
// Netpoll: the waiting goroutine parks in the Go runtime's poller, as a
// net.Conn's Read does: the Poller's own epoll set holds the fds and the
// wake eventfd, and is itself registered with the runtime's poller. A
// parked wait occupies no OS thread (200 waiters add none; under Ppoll
// they add 200), but each wake-up goes through the runtime's scheduler.
//
// Measured on QEMU's instruction-counted clock (make bench-vm
// BENCHICOUNT=shift=0,sleep=off,align=off: one vCPU, 6.1's rxe, guest
// time counting instructions), with cq.Channel's Poller in either mode,
// as Go/C time ratio against rdma-core's tool, median of 5 (rc-pingpong)
// or 7 (ib_send_lat, Go client) interleaved rounds with the bootstrap
// 95 % interval:
//
//	                      Ppoll              Netpoll
//	rc-pingpong -e 64 B   1.18 [1.17, 1.20]  1.89 [1.65, 1.93]
//	rc-pingpong -e 4 KiB  1.06 [1.06, 1.06]  1.10 [1.08, 1.10]
//	ib_send_lat -e 64 B   1.10 [1.10, 1.11]  1.43 [1.38, 1.59]
//	ib_send_lat -e 4 KiB  1.14 [1.14, 1.15]  1.18 [1.17, 1.24]
//
// So completion channels, where every completion of an event-driven loop
// pays the wake-up, and the server's receive loop wait with Ppoll; the
// waits that are many or long and rare (RDMA CM channels, rsocket
// connections, async events, device removal watches) park with Netpoll.
// (The Ppoll column predates registered waits.)
//
// # Registered waits
//
// A ppoll(2) sets up a poll table entry on the wait queue of every fd it
// is given, and takes them all down again, on every call: a loop that
// waits for one completion channel again and again pays that per event.
// Register builds an epoll set once, holding the fds and the wake eventfd
// (level-triggered); under Ppoll, a Wait on exactly those fds with a
// context that cannot be cancelled (context.Background, whose Done is nil)
// is then one epoll_pwait2(2) on that set, with the deadline as a
// nanosecond timeout. Before Linux 5.11, which has no epoll_pwait2, it is
// epoll_pwait(2) with the timeout rounded up to a millisecond (never
// early; found out once, on the first ENOSYS). A cancellable context
// brings an eventfd of its own to the wait, and other fds are not in the
// set: those Waits poll as above. cq.Channel registers the fds GetEvent
// waits on, so a GetEvent with context.Background takes this path.
//
// Measured as above (make bench-vm's -icount clock, one vCPU; rc-pingpong
// -e, Go/C time ratio, median of 9 interleaved rounds with the bootstrap
// 95 % interval), cq.Channel waiting with ppoll and with the registered
// epoll_pwait2:
//
//	                            ppoll                 epoll_pwait2
//	6.1   rc-pingpong -e 64 B   1.126 [1.099, 1.156]  1.021 [1.014, 1.028]
//	6.1   rc-pingpong -e 4 KiB  1.032 [1.030, 1.038]  1.028 [1.022, 1.032]
//	6.12  rc-pingpong -e 64 B   1.170 [1.164, 1.178]  1.127 [1.121, 1.184]
//	6.12  rc-pingpong -e 4 KiB  1.057 [1.054, 1.077]  1.045 [1.043, 1.047]
//
// Traced on 6.1 at 64 B (integration's TestEventTraceAccount, one run
// each), a wait costs 3.0 k instructions in the kernel as epoll_pwait2
// against 3.9 k as ppoll; user space per iteration went from 15.0 k to
// 11.7 k in the Go client and stayed at 10.4 k in the Go server.
//
// The package sits under uverbs, and imports nothing of pureverbs but the
// leak check, so that uverbs, cq, qp/rdmacm, qp/rsocket and server all
// may use it.
package fdwait

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// one is the 8-byte count 1, what a write to an eventfd adds.
var one = [8]byte{1}

// Mode is how a Poller's waits block; see the package documentation.
type Mode int

const (
	// Ppoll waits with ppoll(2) on the waiting goroutine's OS thread:
	// the lowest latency, one thread per waiter.
	Ppoll Mode = iota
	// Netpoll parks the waiting goroutine in the Go runtime's poller:
	// no thread per waiter, a little more per wake-up. Concurrent Waits
	// on one Poller take turns.
	Netpoll
)

// Poller waits for its fds; safe for concurrent use.
type Poller struct {
	mode Mode
	// waiters is read-held by every Wait; Close takes it for writing,
	// after signalling evfd, so that no fd is closed under a wait.
	waiters sync.RWMutex
	closing atomic.Bool
	closed  bool
	// evfd is the eventfd Wake and Close write. Close sets closing first
	// and its count is never taken back: whoever drains the fd and then
	// finds closing set writes it again (see clearWake).
	evfd  int
	watch leakcheck.Watch

	// armed keeps the last cancellable Wait's registration with its
	// context (see arm); shared with the GC cleanup.
	armed *armedSlot
	// reg is the epoll set Register built (Ppoll); shared with the GC
	// cleanup.
	reg *regSlot

	thread // Ppoll's state
	net    *netWait
}

// pollerRes is what a dropped Poller's cleanup releases.
type pollerRes struct {
	evfd  int
	armed *armedSlot
	reg   *regSlot
	net   *netWait
}

// New returns a Poller whose waits block as m says.
func New(m Mode) (*Poller, error) {
	if m != Ppoll && m != Netpoll {
		return nil, fmt.Errorf("fdwait: mode %d: %w", m, unix.EINVAL)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("fdwait: eventfd: %w", err)
	}
	p := &Poller{mode: m, evfd: efd, armed: new(armedSlot), reg: new(regSlot)}
	if m == Netpoll {
		if p.net, err = newNetWait(efd); err != nil {
			unix.Close(efd)
			return nil, err
		}
	}
	// A dropped Poller's fds are closed, and its armed registration taken
	// off its context: a context that is never done would keep it alive.
	p.watch = leakcheck.Object(p, "fdwait.Poller eventfd", func(r pollerRes) {
		r.armed.release()
		r.reg.close()
		if r.net != nil {
			r.net.close()
		}
		unix.Close(r.evfd)
	}, pollerRes{efd, p.armed, p.reg, p.net})
	return p, nil
}

// FDError is a watched fd that poll reported failed (POLLERR, POLLNVAL;
// epoll's EPOLLERR for a registered wait) rather than readable. A hang-up
// (POLLHUP) is no failure: the fd reads as readable, and its read says
// what happened.
type FDError struct {
	FD      int
	Revents int16
}

func (e *FDError) Error() string {
	return fmt.Sprintf("fdwait: fd %d failed (revents %#x)", e.FD, e.Revents)
}

// Wait blocks until one of fds (at most MaxFDs, which stay the caller's:
// Wait never reads or closes them; a negative fd is none) is readable (it
// returns nil; the caller then reads it, and waits again if another reader
// was first), Wake is called (ErrWoken), ctx is done (ctx.Err()), deadline
// passes (os.ErrDeadlineExceeded; the zero time is no deadline), or Close
// has begun (ErrClosed). A watched fd that failed is an *FDError. A
// deadline already past still looks at the fds once, without blocking.
// Wait allocates nothing once a cancellable ctx is registered: the
// registration stays with the Poller after the wait, so that a loop
// waiting again and again with one context registers it once. Under Ppoll,
// a Wait on the fds given to Register, with a ctx that cannot be
// cancelled, is one epoll_pwait2 on the registered set; see Register.
//
// Under Netpoll the fds stay in the Poller's epoll set from the first Wait
// that names them until a Wait that does not, or Close: the caller must
// not close one of them before then (a closed fd's number may come back
// as another file, which the set would not hold).
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
	if p.mode == Netpoll {
		return p.waitNet(ctx, deadline, fds)
	}
	return p.waitThread(ctx, deadline, fds)
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

// woken is a Wait's result once the wake eventfd was found readable.
func (p *Poller) woken() error {
	if p.closing.Load() || p.clearWake() {
		return ErrClosed
	}
	return ErrWoken
}

// Close wakes every Wait with ErrClosed, waits for them to return and
// releases the Poller's fds; the watched fds are the caller's to close,
// which it may do once Close returns. Idempotent.
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
	p.armed.release()
	p.thread.close()
	p.reg.close()
	if p.net != nil {
		p.net.close()
	}
	unix.Close(p.evfd)
	return nil
}

// armedSlot holds at most one registration with a context.
type armedSlot struct{ p atomic.Pointer[armed] }

// release unregisters the slot's registration, if any, and frees it.
func (s *armedSlot) release() {
	if a := s.p.Swap(nil); a != nil {
		a.unregister()
		if a.w != nil {
			a.w.close()
		}
	}
}

// armed is a registration (context.AfterFunc) with the contexts whose Done
// channel is done: it fires when they are done. Under Ppoll it writes w,
// an eventfd the wait polls; under Netpoll it puts the Poller's epoll
// file's read deadline in the past, which wakes the parked wait.
type armed struct {
	done <-chan struct{}
	stop func() bool
	w    *waker      // Ppoll
	ran  atomic.Bool // Netpoll: the AfterFunc has returned
}

// unregister stops a's AfterFunc. If it already started, it waits for it
// to end, so that nothing it does reaches a wait to come (and under Ppoll
// takes its count back).
func (a *armed) unregister() {
	if a.stop() {
		return
	}
	if a.w != nil {
		a.w.drain()
		return
	}
	for !a.ran.Load() {
		time.Sleep(time.Microsecond)
	}
}

// arm returns a registration with ctx, whose Done channel is done: the
// slot's when it was made with a context of the same Done channel (a loop
// waiting with one context registers it once), otherwise a new one,
// releasing the slot's. The caller owns it until keepArmed.
func (p *Poller) arm(ctx context.Context, done <-chan struct{}) (*armed, error) {
	a := p.armed.p.Swap(nil)
	if a != nil && a.done == done {
		return a, nil
	}
	if a != nil {
		p.putArmed(a)
	}
	if p.mode == Netpoll {
		a := &armed{done: done}
		n := p.net
		a.stop = context.AfterFunc(ctx, func() {
			n.expire()
			a.ran.Store(true)
		})
		return a, nil
	}
	w, err := p.getWaker()
	if err != nil {
		return nil, err
	}
	return &armed{done: done, w: w, stop: context.AfterFunc(ctx, w.fire)}, nil
}

// keepArmed leaves a registered for the next Wait with the same context,
// unless the context is done (a has fired), the Poller is closing, or
// another waiter left one first: then it releases a.
func (p *Poller) keepArmed(ctx context.Context, a *armed) {
	if ctx.Err() != nil || p.closing.Load() || !p.armed.p.CompareAndSwap(nil, a) {
		p.putArmed(a)
	}
}

// putArmed unregisters a and keeps its waker, if any, as the spare.
func (p *Poller) putArmed(a *armed) {
	a.unregister()
	if a.w != nil {
		p.putWaker(a.w)
	}
}
