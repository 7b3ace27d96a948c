package fdwait

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pastTime is a read deadline that has passed: it wakes a parked wait.
var pastTime = time.Unix(1, 0)

// netWait is a Netpoll Poller's state: an epoll set holding the watched
// fds and the wake eventfd, registered with the Go runtime's poller as an
// *os.File. One Wait at a time owns it (turn); the others wait for their
// turn in a select that ctx and the deadline end (Close ends the owner's
// wait, and the wake eventfd it leaves readable each next one's).
type netWait struct {
	f  *os.File
	rc syscall.RawConn
	// epfd is f's fd, the epoll set.
	epfd int
	// turn holds a token while a Wait owns the set.
	turn chan struct{}
	// expired is set by a context's AfterFunc that put the read deadline
	// in the past; the next wait sets its own again.
	expired atomic.Bool

	// The rest belongs to the Wait whose turn it is.
	evfd     int
	watched  [MaxFDs]int // -1: none
	deadline time.Time   // f's read deadline
	events   [MaxFDs + 1]unix.EpollEvent
	result   error // what ready found
	readyFn  func(uintptr) bool
}

func newNetWait(evfd int) (*netWait, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fdwait: epoll_create1: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("fdwait: epoll_ctl: %w", err)
	}
	// A non-blocking fd is what os.NewFile registers with the runtime's
	// poller.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("fdwait: epoll fd non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(epfd), "fdwait-epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fdwait: epoll fd: %w", err)
	}
	n := &netWait{f: f, rc: rc, epfd: epfd, turn: make(chan struct{}, 1), evfd: evfd, watched: [MaxFDs]int{-1, -1}}
	n.readyFn = n.ready
	return n, nil
}

// expire wakes the wait in progress, if any, with a read deadline in the
// past; a context's AfterFunc.
func (n *netWait) expire() {
	n.expired.Store(true)
	n.f.SetReadDeadline(pastTime)
}

func (n *netWait) close() { n.f.Close() }

// waitNet is Wait under Netpoll.
func (p *Poller) waitNet(ctx context.Context, deadline time.Time, fds []int) error {
	n := p.net
	if err := n.take(ctx, deadline); err != nil {
		return err
	}
	defer func() { <-n.turn }()
	if err := n.watch(fds); err != nil {
		return err
	}
	if done := ctx.Done(); done != nil {
		a, err := p.arm(ctx, done)
		if err != nil {
			return err
		}
		defer p.keepArmed(ctx, a)
	}
	// The deadline is set before ctx is looked at: a cancellation after
	// the look expires it again.
	if n.expired.Swap(false) || !n.deadline.Equal(deadline) {
		n.f.SetReadDeadline(deadline)
		n.deadline = deadline
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		// The runtime's poller fails a wait past its deadline before
		// looking; this looks once.
		if n.ready(0) {
			return p.netResult()
		}
		return os.ErrDeadlineExceeded
	}
	for {
		err := n.rc.Read(n.readyFn)
		switch {
		case err == nil:
			return p.netResult()
		case errors.Is(err, os.ErrDeadlineExceeded):
			if err := ctx.Err(); err != nil {
				return err
			}
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				return os.ErrDeadlineExceeded
			}
			// A context that is not this wait's expired it before this
			// wait's arm took it off.
			n.expired.Store(false)
			n.f.SetReadDeadline(deadline)
		case p.closing.Load():
			return ErrClosed
		default:
			return fmt.Errorf("fdwait: wait: %w", err)
		}
	}
}

// take waits for the turn to own the epoll set: at once when no other
// Wait does; otherwise until it is free, ctx is done or the deadline
// passes.
func (n *netWait) take(ctx context.Context, deadline time.Time) error {
	select {
	case n.turn <- struct{}{}:
		return nil
	default:
	}
	var expire <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expire = t.C
	}
	select {
	case n.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expire:
		return os.ErrDeadlineExceeded
	}
}

// watch makes the epoll set hold fds (and the wake eventfd), level-
// triggered: unchanged, it costs nothing.
func (n *netWait) watch(fds []int) error {
	var want [MaxFDs]int
	for i := range want {
		want[i] = -1
		if i < len(fds) && fds[i] >= 0 {
			want[i] = fds[i]
		}
	}
	if want == n.watched {
		return nil
	}
	for _, fd := range n.watched {
		if fd >= 0 && !contains(want, fd) {
			// Fails harmlessly when the fd was closed (and so left the set).
			unix.EpollCtl(n.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		}
	}
	for _, fd := range want {
		if fd < 0 || contains(n.watched, fd) {
			continue
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(n.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil && err != unix.EEXIST {
			n.watched = [MaxFDs]int{-1, -1}
			for _, fd := range want {
				if fd >= 0 {
					unix.EpollCtl(n.epfd, unix.EPOLL_CTL_DEL, fd, nil)
				}
			}
			return fmt.Errorf("fdwait: watch fd %d: epoll_ctl: %w", fd, err)
		}
	}
	n.watched = want
	return nil
}

func contains(fds [MaxFDs]int, fd int) bool {
	for _, f := range fds {
		if f == fd {
			return true
		}
	}
	return false
}

// ready looks at the epoll set without blocking: what RawConn.Read calls
// before parking and after each wake-up. It reports whether the wait is
// over, with its result in n.result: the wake eventfd first, then a
// failed fd, then a readable one.
func (n *netWait) ready(uintptr) bool {
	var got int
	for {
		k, err := unix.EpollWait(n.epfd, n.events[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			n.result = fmt.Errorf("fdwait: epoll_wait: %w", err)
			return true
		}
		got = k
		break
	}
	if got == 0 {
		return false
	}
	n.result = nil
	woken, failed := scanEvents(n.events[:got], n.evfd)
	switch {
	case woken:
		n.result = errWokenMark
	case failed != nil:
		n.result = failed
	}
	return true
}

// scanEvents reads what an epoll wait returned: whether the wake eventfd
// evfd is among the events (it counts first), otherwise a watched fd that
// failed, if any.
func scanEvents(events []unix.EpollEvent, evfd int) (woken bool, failed *FDError) {
	for i := range events {
		ev := &events[i]
		switch {
		case int(ev.Fd) == evfd:
			return true, nil
		case ev.Events&unix.EPOLLERR != 0:
			failed = &FDError{FD: int(ev.Fd), Revents: int16(ev.Events)}
		}
	}
	return false, failed
}

// errWokenMark is ready's result for the wake eventfd, which the Poller
// turns into ErrWoken or ErrClosed.
var errWokenMark = errors.New("fdwait: wake eventfd readable")

// netResult is the result of a Netpoll wait that ready ended.
func (p *Poller) netResult() error {
	switch err := p.net.result; {
	case err == errWokenMark:
		return p.woken()
	case err != nil && p.closing.Load():
		return ErrClosed
	default:
		return err
	}
}
