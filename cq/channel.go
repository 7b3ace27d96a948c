package cq

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// ErrNoEvent is returned (wrapped) by TryGetEvent when no event is queued.
// It also matches unix.EAGAIN.
var ErrNoEvent = errors.New("cq: no completion event")

// ErrClosed is returned by operations on a closed Channel or CQ. It is
// uverbs.ErrClosed, the one sentinel for every package.
var ErrClosed = uverbs.ErrClosed

// errNoEvent wraps ErrNoEvent and EAGAIN without allocating per call.
var errNoEvent = fmt.Errorf("%w (%w)", ErrNoEvent, unix.EAGAIN)

// eventSource is what a Channel reads events from: a
// *uverbs.CompChannel (tests substitute a pipe).
type eventSource interface {
	FD() int
	ReadEvent() (uint64, error)
	Close() error
}

// Channel is a completion channel. Its fd becomes readable when an armed CQ
// attached to it gets a completion; GetEvent and TryGetEvent turn the event
// back into the *CQ. Safe for concurrent use.
type Channel struct {
	cc  *uverbs.CompChannel // nil for a test source
	src eventSource

	mu         sync.Mutex
	cqs        map[uint64]*CQ // by the user handle given to the kernel
	nextHandle uint64

	// waiters is read-held by every GetEvent/TryGetEvent; Close takes it
	// for writing, after signalling closeFD, so that the channel fd is not
	// closed under a poll.
	waiters sync.RWMutex
	closing atomic.Bool
	closeFD int             // eventfd, written once by Close and never drained
	cleanup runtime.Cleanup // closes closeFD if the Channel is dropped unclosed
	closed  bool
}

// NewChannel creates a completion channel on ctx's device.
func NewChannel(ctx *uverbs.Context) (*Channel, error) {
	cc, err := ctx.CreateCompChannel()
	if err != nil {
		return nil, err
	}
	ch, err := newChannel(cc)
	if err != nil {
		cc.Close()
		return nil, err
	}
	ch.cc = cc
	return ch, nil
}

func newChannel(src eventSource) (*Channel, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("cq: eventfd: %w", err)
	}
	ch := &Channel{src: src, cqs: make(map[uint64]*CQ), closeFD: efd}
	ch.cleanup = runtime.AddCleanup(ch, func(fd int) { unix.Close(fd) }, efd)
	return ch, nil
}

// FD returns the channel's fd: non-blocking, readable when an event is
// queued (for epoll). Read events with TryGetEvent, not from the fd.
func (ch *Channel) FD() int { return ch.src.FD() }

// TryGetEvent returns the CQ of the next queued event without blocking, or
// an error wrapping ErrNoEvent. The event must be acknowledged with the
// CQ's Ack. It allocates nothing.
func (ch *Channel) TryGetEvent() (*CQ, error) {
	ch.waiters.RLock()
	defer ch.waiters.RUnlock()
	if ch.closing.Load() {
		return nil, ErrClosed
	}
	return ch.tryGet()
}

func (ch *Channel) tryGet() (*CQ, error) {
	h, err := ch.src.ReadEvent()
	if err != nil {
		if errors.Is(err, unix.EAGAIN) {
			return nil, errNoEvent
		}
		return nil, err
	}
	ch.mu.Lock()
	c := ch.cqs[h]
	ch.mu.Unlock()
	if c == nil {
		// Only a CQ closed while its event was being read gets here:
		// the kernel raises no event before a CQ is armed.
		return nil, fmt.Errorf("cq: completion event for unknown CQ handle %d", h)
	}
	c.delivered.Add(1)
	return c, nil
}

// GetEvent waits for the next event and returns its CQ. It returns
// ctx.Err() once ctx is done and ErrClosed once the channel is closed. The
// event must be acknowledged with the CQ's Ack. The wait is a poll(2) on the
// channel fd, an eventfd signalled when ctx is done and one signalled by
// Close; it occupies an OS thread, so a program waiting on many channels
// should put their FDs into one epoll set instead.
func (ch *Channel) GetEvent(ctx context.Context) (*CQ, error) {
	ch.waiters.RLock()
	defer ch.waiters.RUnlock()
	if ch.closing.Load() {
		return nil, ErrClosed
	}
	cancelFD := -1
	for {
		c, err := ch.tryGet()
		if !errors.Is(err, ErrNoEvent) {
			return c, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if cancelFD < 0 && ctx.Done() != nil {
			fd, stop, err := notifyDone(ctx)
			if err != nil {
				return nil, err
			}
			defer stop()
			cancelFD = fd
		}
		fds := [3]unix.PollFd{
			{Fd: int32(ch.src.FD()), Events: unix.POLLIN},
			{Fd: int32(ch.closeFD), Events: unix.POLLIN},
			{Fd: int32(cancelFD), Events: unix.POLLIN}, // poll ignores -1
		}
		if _, err := unix.Poll(fds[:], -1); err != nil && err != unix.EINTR {
			return nil, fmt.Errorf("cq: poll completion channel: %w", err)
		}
		if fds[1].Revents != 0 {
			return nil, ErrClosed
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
			return nil, fmt.Errorf("cq: completion channel fd failed (revents %#x)", fds[0].Revents)
		}
	}
}

// notifyDone returns an eventfd that becomes readable when ctx is done, and
// a stop function that releases it; stop waits for a notification already
// running so that it never writes to a closed (or reused) fd.
func notifyDone(ctx context.Context) (int, func(), error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, nil, fmt.Errorf("cq: eventfd: %w", err)
	}
	done := make(chan struct{})
	stopNotify := context.AfterFunc(ctx, func() {
		defer close(done)
		one := [8]byte{1}
		unix.Write(fd, one[:])
	})
	return fd, func() {
		if !stopNotify() {
			<-done
		}
		unix.Close(fd)
	}, nil
}

// reserve assigns the user handle of a CQ about to be created; the slot
// counts as a user of the channel from now on, so Close cannot slip in
// between. It fails once Close has begun.
func (ch *Channel) reserve() (uint64, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closing.Load() {
		return 0, ErrClosed
	}
	ch.nextHandle++
	ch.cqs[ch.nextHandle] = nil
	return ch.nextHandle, nil
}

func (ch *Channel) add(h uint64, c *CQ) {
	ch.mu.Lock()
	ch.cqs[h] = c
	ch.mu.Unlock()
}

func (ch *Channel) remove(h uint64) {
	ch.mu.Lock()
	delete(ch.cqs, h)
	ch.mu.Unlock()
}

// Close closes the channel. It refuses (EBUSY) while CQs use it. Blocked
// GetEvent calls return ErrClosed. Idempotent.
func (ch *Channel) Close() error {
	ch.mu.Lock()
	if n := len(ch.cqs); n != 0 {
		ch.mu.Unlock()
		return fmt.Errorf("cq: close channel: %d CQs still use it: %w", n, unix.EBUSY)
	}
	first := !ch.closing.Swap(true)
	ch.mu.Unlock()
	if first {
		// Any non-zero count makes the eventfd readable; it is never
		// drained, so it wakes every GetEvent for good.
		one := [8]byte{1}
		unix.Write(ch.closeFD, one[:])
	}
	ch.waiters.Lock()
	defer ch.waiters.Unlock()
	if ch.closed {
		return nil
	}
	ch.closed = true
	err := ch.src.Close()
	ch.cleanup.Stop()
	unix.Close(ch.closeFD)
	return err
}
