package fdwait

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Register builds, once, an epoll set holding fds (at most MaxFDs; a
// negative fd is none) and the Poller's wake eventfd, level-triggered.
// Under Ppoll, a Wait whose non-negative fds are then exactly the
// registered ones, in any order, and whose ctx cannot be cancelled
// (ctx.Done() is nil) is one epoll_pwait2(2) on that set instead of a
// ppoll(2) that sets up its poll table again on every call; other Waits
// poll as before. Register is called once, before the waits: a second
// call fails with EINVAL (a set a wait may be using is not replaced). The
// registered fds stay the caller's, as in Wait, and must stay open until
// Close: epoll drops a closed file from the set by itself, and a new file
// given the same number would not be in it.
//
// Under Netpoll the Poller's epoll set already follows the fds each Wait
// names: Register checks the number of fds and does nothing else. After
// Close, Register returns ErrClosed under either mode.
func (p *Poller) Register(fds ...int) error {
	if len(fds) > MaxFDs {
		return fmt.Errorf("fdwait: register %d fds, at most %d: %w", len(fds), MaxFDs, unix.EINVAL)
	}
	p.waiters.RLock()
	defer p.waiters.RUnlock()
	if p.closing.Load() {
		return ErrClosed
	}
	if p.mode == Netpoll {
		return nil
	}
	if p.reg.p.Load() != nil {
		return fmt.Errorf("fdwait: register: fds already registered: %w", unix.EINVAL)
	}
	r, err := newRegSet(p.evfd, fds)
	if err != nil {
		return err
	}
	if !p.reg.p.CompareAndSwap(nil, r) {
		r.close()
		return fmt.Errorf("fdwait: register: fds already registered: %w", unix.EINVAL)
	}
	return nil
}

// NewRegistered returns a Ppoll Poller with fds registered: the Poller
// of a waiter that always waits on the same fds, whose waits without a
// cancellable context are then each one epoll_pwait2 (see Register).
func NewRegistered(fds ...int) (*Poller, error) {
	p, err := New(Ppoll)
	if err != nil {
		return nil, err
	}
	if err := p.Register(fds...); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// regSlot holds the Poller's registered set, shared with its GC cleanup.
type regSlot struct{ p atomic.Pointer[regSet] }

// close closes the registered set, if any.
func (s *regSlot) close() {
	if r := s.p.Swap(nil); r != nil {
		r.close()
	}
}

// regSet is the epoll set Register built.
type regSet struct {
	epfd int
	fds  [MaxFDs]int // the registered fds; -1: none
	n    int         // how many of fds are not -1
}

func newRegSet(evfd int, fds []int) (*regSet, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fdwait: register: epoll_create1: %w", err)
	}
	r := &regSet{epfd: epfd, fds: [MaxFDs]int{-1, -1}}
	for _, fd := range append([]int{evfd}, fds...) {
		if fd < 0 {
			continue
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			return nil, fmt.Errorf("fdwait: register fd %d: epoll_ctl: %w", fd, err)
		}
		if fd != evfd {
			r.fds[r.n] = fd
			r.n++
		}
	}
	return r, nil
}

func (r *regSet) close() { unix.Close(r.epfd) }

// matches reports whether the non-negative fds of a Wait are exactly the
// registered ones.
func (r *regSet) matches(fds []int) bool {
	n := 0
	for i, fd := range fds {
		if fd < 0 {
			continue
		}
		for _, prev := range fds[:i] {
			if prev == fd {
				return false
			}
		}
		if !contains(r.fds, fd) {
			return false
		}
		n++
	}
	return n == r.n
}

// noPwait2 is set once epoll_pwait2 has failed with ENOSYS (Linux before
// 5.11): every registered wait then uses epoll_pwait.
var noPwait2 atomic.Bool

// waitRegistered is a Ppoll Wait on the registered set r: fds as
// registered, a context that cannot be cancelled. It yields as
// waitThread does, for the same reason.
func (p *Poller) waitRegistered(r *regSet, deadline time.Time) error {
	now := p.yieldBeforeWait()
	var events [MaxFDs + 1]unix.EpollEvent
	for {
		n, err := r.wait(events[:], deadline, now)
		if err == unix.EINTR {
			now = sinceEpoch()
			continue
		}
		if err != 0 {
			return fmt.Errorf("fdwait: %s: %w", r.waitName(), err)
		}
		woken, failed := scanEvents(events[:n], p.evfd)
		if woken {
			return p.woken()
		}
		if failed != nil {
			if p.closing.Load() {
				return ErrClosed
			}
			return failed
		}
		if n > 0 {
			return nil
		}
		// Nothing ready: the timeout ran out. epoll_pwait's milliseconds
		// are rounded up, so it is never early; the loop waits again
		// should the clock say otherwise.
		now = sinceEpoch()
		if !deadline.IsZero() && timeLeft(deadline, now) == 0 {
			return os.ErrDeadlineExceeded
		}
	}
}

// wait is one epoll_pwait2 on the set, until deadline (the zero time: no
// deadline) from now (a sinceEpoch reading), or epoll_pwait where the
// kernel has no epoll_pwait2.
func (r *regSet) wait(events []unix.EpollEvent, deadline time.Time, now time.Duration) (int, syscall.Errno) {
	var left time.Duration
	if !deadline.IsZero() {
		left = timeLeft(deadline, now)
	}
	if !noPwait2.Load() {
		var ts *unix.Timespec
		var t unix.Timespec
		if !deadline.IsZero() {
			t = unix.NsecToTimespec(int64(left))
			ts = &t
		}
		n, err := epollPwait2(r.epfd, events, ts)
		if err != unix.ENOSYS {
			return n, err
		}
		noPwait2.Store(true)
	}
	msec := -1
	if !deadline.IsZero() {
		// Rounded up: a wait that returns before the deadline only to
		// wait again costs a wake-up.
		msec = int(min((left+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
	}
	return epollPwait(r.epfd, events, msec)
}

// waitName is the system call wait makes, for its errors.
func (r *regSet) waitName() string {
	if noPwait2.Load() {
		return "epoll_pwait"
	}
	return "epoll_pwait2"
}

// epollPwait2 is epoll_pwait2(2) without a signal mask; a nil ts waits
// without a timeout. x/sys/unix does not wrap it; syscall.Syscall6 is
// called itself, as in ppoll.
func epollPwait2(epfd int, events []unix.EpollEvent, ts *unix.Timespec) (int, syscall.Errno) {
	n, _, errno := syscall.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(epfd),
		uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)),
		uintptr(unsafe.Pointer(ts)), 0, 0)
	runtime.KeepAlive(events)
	runtime.KeepAlive(ts)
	return int(n), errno
}

// epollPwait is epoll_pwait(2) without a signal mask, with its errno as
// epollPwait2's: unix.EpollWait's error would be compared as an interface.
func epollPwait(epfd int, events []unix.EpollEvent, msec int) (int, syscall.Errno) {
	n, _, errno := unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd),
		uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)),
		uintptr(msec), 0, 0)
	runtime.KeepAlive(events)
	return int(n), errno
}
