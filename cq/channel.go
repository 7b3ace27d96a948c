package cq

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// ErrNoEvent is returned (wrapped) by TryGetEvent when no event is queued.
// It also matches unix.EAGAIN.
var ErrNoEvent = errors.New("cq: no completion event")

// ErrClosed is returned by operations on a closed Channel or CQ. It is
// uverbs.ErrClosed, the one sentinel for every package.
var ErrClosed = uverbs.ErrClosed

// probeEvery is how often a GetEvent on an idle channel reads before it
// polls, to find out whether events have started to queue up.
const probeEvery = 8

// yieldEvery is how long a goroutine may go on waiting in ppoll, wait
// after wait, without passing through the scheduler; see yieldBeforeWait.
const yieldEvery = 2 * time.Millisecond

// epoch is the origin of Channel.yielded: a monotonic clock reading.
var epoch = time.Now()

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

	mu sync.Mutex
	// cqs holds the channel's CQs by the user handle given to the kernel,
	// weakly, so that a CQ the program drops is collected (its ring
	// unmapped, the leak reported) while the channel lives on. A reserved
	// slot, whose CQ is being created, holds the zero weak.Pointer.
	cqs map[uint64]weak.Pointer[CQ]

	// waiters is read-held by every GetEvent/TryGetEvent; Close takes it
	// for writing, after signalling closeFD, so that the channel fd is not
	// closed under a poll.
	waiters sync.RWMutex
	closing atomic.Bool
	closeFD int             // eventfd, written once by Close and never drained
	watch   leakcheck.Watch // closes closeFD if the Channel is dropped unclosed
	closed  bool

	// idle is 0 while GetEvent finds events already queued, so that it
	// starts with the read (one system call, like ibv_get_cq_event);
	// after a read that found none it counts waits, which start with the
	// poll instead of a read that would only say EAGAIN (poll and read:
	// two calls, not three). A guess, updated without synchronisation;
	// either order is correct.
	idle atomic.Uint32

	// yielded is when a GetEvent last went through the scheduler (see
	// yieldBeforeWait), in nanoseconds since epoch.
	yielded atomic.Int64
	// spare is a cancellation eventfd kept for the next GetEvent with a
	// cancellable context, so that such a wait creates none.
	spare atomic.Pointer[waker]
	// armed keeps the last cancellable GetEvent's waker registered with
	// its context, so that a loop waiting with one context registers it
	// once (see armedWaker); shared with the GC cleanup.
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
	// The Context's Close wakes the waiters before it closes the fd.
	w := weak.Make(ch)
	if err := cc.OnContextClose(func() error {
		if ch := w.Value(); ch != nil {
			return ch.shutdown()
		}
		return nil
	}); err != nil {
		return nil, err // the Context closed meanwhile; so did ch
	}
	return ch, nil
}

func newChannel(src eventSource) (*Channel, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("cq: eventfd: %w", err)
	}
	ch := &Channel{src: src, cqs: make(map[uint64]weak.Pointer[CQ]), closeFD: efd, armed: new(armedSlot)}
	// A dropped Channel's eventfd is closed, and its armed waker taken off
	// its context: a context that is never done would keep it alive.
	ch.watch = leakcheck.Object(ch, "cq.Channel", func(r chanRes) {
		unix.Close(r.closeFD)
		if a := r.armed.p.Swap(nil); a != nil {
			a.w.unregister(a.stop)
			a.w.close()
		}
	}, chanRes{efd, ch.armed})
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
	for {
		h, err := ch.src.ReadEvent()
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return nil, errNoEvent
			}
			return nil, err
		}
		ch.mu.Lock()
		w, ok := ch.cqs[h]
		ch.mu.Unlock()
		c := w.Value()
		if c == nil {
			if ok {
				// The CQ was dropped and collected after it was
				// armed (nobody can ack or poll it), or its slot
				// is reserved and not filled yet (its CQ is
				// being created, so it was never armed).
				continue
			}
			// Only a CQ closed while its event was being read gets
			// here: the kernel raises no event before a CQ is armed.
			return nil, fmt.Errorf("cq: completion event for unknown CQ handle %d", h)
		}
		c.delivered.Add(1)
		return c, nil
	}
}

// GetEvent waits for the next event and returns its CQ. It returns
// ctx.Err() once ctx is done and ErrClosed once the channel is closed
// (every blocked GetEvent wakes). The event must be acknowledged with the
// CQ's Ack.
//
// Its cost is that of ibv_get_cq_event plus at most one system call: an
// event already queued is one non-blocking read; otherwise it is one
// poll(2) on the channel fd, the eventfd Close signals and (for a context
// that can be cancelled) an eventfd signalled when ctx is done, then the
// read. Every 2 ms of waiting it also yields to the Go scheduler once, or
// the runtime would take the waiting thread's P mid-wait and then poll at
// a high rate for a while. It allocates nothing: a cancellable context is
// registered (context.AfterFunc) by the first wait with it and stays
// registered for the next ones, until it is done, a wait passes another
// context, or the channel is closed. The wait occupies an OS thread, so a
// program waiting on many channels should put their FDs into one epoll set
// instead.
func (ch *Channel) GetEvent(ctx context.Context) (*CQ, error) {
	ch.waiters.RLock()
	defer ch.waiters.RUnlock()
	if ch.closing.Load() {
		return nil, ErrClosed
	}
	// Read first when events have been found queued, and on every
	// probeEvery-th wait while they have not, to notice a backlog.
	if n := ch.idle.Load(); n == 0 || n%probeEvery == 0 {
		c, err := ch.tryGet()
		if err != errNoEvent {
			if n != 0 {
				ch.idle.Store(0)
			}
			return c, err
		}
		ch.idle.Store(1)
	} else {
		ch.idle.Store(n + 1)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cancelFD := int32(-1) // poll ignores a negative fd
	if done := ctx.Done(); done != nil {
		a, err := ch.arm(ctx, done)
		if err != nil {
			return nil, err
		}
		defer ch.keepArmed(ctx, a)
		cancelFD = int32(a.w.fd)
	}
	ch.yieldBeforeWait()
	for {
		fds := [3]unix.PollFd{
			{Fd: int32(ch.src.FD()), Events: unix.POLLIN},
			{Fd: int32(ch.closeFD), Events: unix.POLLIN},
			{Fd: cancelFD, Events: unix.POLLIN},
		}
		if _, err := unix.Ppoll(fds[:], nil, nil); err != nil && err != unix.EINTR {
			return nil, fmt.Errorf("cq: poll completion channel: %w", err)
		}
		if fds[1].Revents != 0 {
			return nil, ErrClosed
		}
		if fds[2].Revents != 0 {
			return nil, ctx.Err()
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
			if ch.closing.Load() {
				return nil, ErrClosed
			}
			return nil, fmt.Errorf("cq: completion channel fd failed (revents %#x)", fds[0].Revents)
		}
		if fds[0].Revents == 0 {
			continue // EINTR
		}
		c, err := ch.tryGet()
		if err != errNoEvent {
			return c, err
		}
		// Another waiter took the event.
	}
}

// waker is an eventfd that a context.AfterFunc writes once ctx is done; a
// GetEvent polls it next to the channel fd.
type waker struct {
	fd    int
	fire  func() // w.write, bound once
	watch leakcheck.Watch
}

var one = [8]byte{1}

func (w *waker) write() { unix.Write(w.fd, one[:]) }

// getWaker takes the channel's spare waker, or makes one.
func (ch *Channel) getWaker() (*waker, error) {
	if w := ch.spare.Swap(nil); w != nil {
		return w, nil
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("cq: eventfd: %w", err)
	}
	w := &waker{fd: fd}
	w.fire = w.write
	w.watch = leakcheck.Object(w, "cq.Channel cancellation eventfd", func(fd int) { unix.Close(fd) }, fd)
	return w, nil
}

// arm returns a waker registered with ctx, whose Done channel is done: the
// armed one when it was registered with a context of the same Done channel
// (a loop waiting with one context registers it once), otherwise a new
// registration, releasing the armed one. The caller owns it until
// keepArmed.
func (ch *Channel) arm(ctx context.Context, done <-chan struct{}) (*armedWaker, error) {
	a := ch.armed.p.Swap(nil)
	if a != nil && a.done == done {
		return a, nil
	}
	if a != nil {
		ch.putWaker(a.w, a.stop)
	}
	w, err := ch.getWaker()
	if err != nil {
		return nil, err
	}
	return &armedWaker{done: done, w: w, stop: context.AfterFunc(ctx, w.fire)}, nil
}

// keepArmed leaves a registered for the next GetEvent with the same
// context, unless the context is done (its waker has fired), the channel
// is closing, or another waiter left one first: then it releases a.
func (ch *Channel) keepArmed(ctx context.Context, a *armedWaker) {
	if ctx.Err() != nil || ch.closing.Load() || !ch.armed.p.CompareAndSwap(nil, a) {
		ch.putWaker(a.w, a.stop)
	}
}

// putWaker unregisters w from its context and keeps it as the spare, or
// closes it when there is one already or the channel is closing.
func (ch *Channel) putWaker(w *waker, stop func() bool) {
	w.unregister(stop)
	if ch.closing.Load() || !ch.spare.CompareAndSwap(nil, w) {
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

// nextHandle numbers the CQs of every channel of the process, so that a
// CQ's user handle is unique in its Context and async events (CQ_ERR)
// resolve to it.
var nextHandle atomic.Uint64

// reserve assigns the user handle of a CQ about to be created; the slot
// counts as a user of the channel from now on, so Close cannot slip in
// between. It fails once Close has begun.
func (ch *Channel) reserve() (uint64, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closing.Load() {
		return 0, ErrClosed
	}
	h := nextHandle.Add(1)
	ch.cqs[h] = weak.Pointer[CQ]{}
	return h, nil
}

// add records c in its reserved slot. The slot stays after c is collected
// without Close (the leak check reports that), so that an event the
// kernel still queues for it is told from one for an unknown handle.
func (ch *Channel) add(h uint64, c *CQ) {
	ch.mu.Lock()
	ch.cqs[h] = weak.Make(c)
	ch.mu.Unlock()
}

func (ch *Channel) remove(h uint64) {
	ch.mu.Lock()
	delete(ch.cqs, h)
	ch.mu.Unlock()
}

// Close closes the channel. It refuses (EBUSY) while CQs use it. A CQ
// the program dropped without Close does not count once the garbage
// collector has collected it (the leak check reports it): its kernel
// object, which keeps the kernel's channel alive, goes with the Context.
// Blocked GetEvent calls return ErrClosed. Idempotent; after the Context's
// Close (which closes the channel the same way) it does nothing.
func (ch *Channel) Close() error {
	ch.mu.Lock()
	if n := ch.users(); n != 0 && !ch.closing.Load() {
		ch.mu.Unlock()
		return fmt.Errorf("cq: close channel: %d CQs still use it: %w", n, unix.EBUSY)
	}
	ch.mu.Unlock()
	return ch.shutdown()
}

// users counts the CQs being created on the channel or still reachable,
// under mu.
func (ch *Channel) users() int {
	n := 0
	for _, w := range ch.cqs {
		if w == (weak.Pointer[CQ]{}) || w.Value() != nil {
			n++
		}
	}
	return n
}

// shutdown wakes every waiter, waits for them to leave the channel, and
// closes the source and the eventfds: Close once no CQ uses the channel,
// and the Context's Close whatever uses it (the kernel keeps the channel
// alive for its CQs, which go with the Context).
func (ch *Channel) shutdown() error {
	ch.mu.Lock()
	first := !ch.closing.Swap(true)
	ch.mu.Unlock()
	if first {
		// Any non-zero count makes the eventfd readable; it is never
		// drained, so it wakes every GetEvent for good.
		unix.Write(ch.closeFD, one[:])
	}
	ch.waiters.Lock()
	defer ch.waiters.Unlock()
	if ch.closed {
		return nil
	}
	ch.closed = true
	err := ch.src.Close()
	ch.watch.Closed()
	unix.Close(ch.closeFD)
	if a := ch.armed.p.Swap(nil); a != nil {
		a.w.unregister(a.stop)
		a.w.close()
	}
	if w := ch.spare.Swap(nil); w != nil {
		w.close()
	}
	return err
}

// chanRes is what a dropped Channel's cleanup releases.
type chanRes struct {
	closeFD int
	armed   *armedSlot
}

// yieldBeforeWait calls runtime.Gosched when the last yield is more than
// yieldEvery ago. A goroutine whose waits are system calls never passes
// through the scheduler, so its P keeps one scheduling tick; after 10 ms of
// that the runtime's monitor thread takes the P away in the middle of a
// wait and then polls every 20 us for a millisecond, in case it must do so
// again. Under rxe those wakeups take CPU from the kernel's packet
// processing and the peer: a 64-byte rc-pingpong -e pair ran at 1.24-1.55x
// C's time without the yield and 1.04-1.12x with it
// (integration.TestEventWaitWakeups). Yielding on every wait costs another
// thread's wakeup each time (the scheduler wakes one to look for work), so
// the yield is rationed.
func (ch *Channel) yieldBeforeWait() {
	now := int64(time.Since(epoch))
	if now-ch.yielded.Load() < int64(yieldEvery) {
		return
	}
	ch.yielded.Store(now)
	runtime.Gosched()
}
