package fdwait

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// yieldEvery is how long a goroutine may go on waiting under Ppoll, wait
// after wait, without passing through the scheduler; see waitThread.
const yieldEvery = 2 * time.Millisecond

// epoch is the origin of thread.yielded: a monotonic clock reading.
var epoch = time.Now()

// thread is a Ppoll Poller's state.
type thread struct {
	// yielded is when a Wait last went through the scheduler, in
	// nanoseconds since epoch.
	yielded atomic.Int64
	// spare is a cancellation eventfd kept for the next Wait with a
	// cancellable context, so that such a wait creates none.
	spare atomic.Pointer[waker]
}

func (t *thread) close() {
	if w := t.spare.Swap(nil); w != nil {
		w.close()
	}
}

// waitThread is Wait under Ppoll: one ppoll(2) over fds, the wake eventfd
// and, for a context that can be cancelled, an eventfd that a
// context.AfterFunc writes; or, on the registered fds with a context that
// cannot be cancelled, waitRegistered.
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
func (p *Poller) waitThread(ctx context.Context, deadline time.Time, fds []int) error {
	cancelFD := int32(-1) // poll ignores a negative fd
	done := ctx.Done()
	if r := p.reg.p.Load(); r != nil && done == nil && r.matches(fds) {
		return p.waitRegistered(r, deadline)
	}
	if done != nil {
		a, err := p.arm(ctx, done)
		if err != nil {
			return err
		}
		defer p.keepArmed(ctx, a)
		cancelFD = int32(a.w.fd)
	}
	now := p.yieldBeforeWait()
	for {
		var ts *unix.Timespec
		var left unix.Timespec
		if !deadline.IsZero() {
			left = unix.NsecToTimespec(int64(timeLeft(deadline, now)))
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
		ready, err := ppoll(pfds[:n+2], ts)
		if err == unix.EINTR {
			now = sinceEpoch()
			continue
		}
		if err != 0 {
			return fmt.Errorf("fdwait: poll: %w", err)
		}
		switch {
		case pfds[n].Revents != 0:
			return p.woken()
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

// yieldBeforeWait calls runtime.Gosched when the last yield is more than
// yieldEvery ago (see waitThread), and returns the clock it read, which
// the wait's timeout then starts from.
func (p *Poller) yieldBeforeWait() (now time.Duration) {
	now = sinceEpoch()
	if int64(now)-p.yielded.Load() < int64(yieldEvery) {
		return now
	}
	p.yielded.Store(int64(now))
	runtime.Gosched()
	return sinceEpoch()
}

// sinceEpoch reads the monotonic clock. A wait reads it once, for its
// yield and its timeout both: under a VM's TCG the clock is a good part
// of a short wait's cost.
func sinceEpoch() time.Duration { return time.Since(epoch) }

// timeLeft is how long from now (a sinceEpoch reading) until deadline, at
// least 0. A deadline without a monotonic reading (time.Unix's, or one
// stripped by Round(0)) is placed by the wall clock as of epoch, the way
// package net fixes a deadline once, when it is set: a later step of the
// wall clock does not move it.
func timeLeft(deadline time.Time, now time.Duration) time.Duration {
	return max(deadline.Sub(epoch)-now, 0)
}

// ppoll is ppoll(2) without a signal mask, with the raw errno: through
// syscall.Syscall6 itself, not x/sys/unix's wrapper (an assembly jump and
// an ABI wrapper, a twentieth of a short wait's user-space instructions).
func ppoll(fds []unix.PollFd, ts *unix.Timespec) (int, syscall.Errno) {
	n, _, errno := syscall.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(unsafe.SliceData(fds))), uintptr(len(fds)),
		uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	runtime.KeepAlive(fds)
	runtime.KeepAlive(ts)
	return int(n), errno
}

// waker is an eventfd that a context.AfterFunc writes once ctx is done; a
// Ppoll wait polls it next to the watched fds.
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

// putWaker keeps w, unregistered, as the spare, or closes it when there is
// one already or the Poller is closing.
func (p *Poller) putWaker(w *waker) {
	if p.closing.Load() || !p.spare.CompareAndSwap(nil, w) {
		w.close()
	}
}

// drain waits for the write of an AfterFunc that has started, so that no
// write can reach the fd once reused or closed, and takes its count back.
func (w *waker) drain() {
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
