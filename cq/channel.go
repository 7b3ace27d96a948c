package cq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// ErrNoEvent is what TryGetEvent returns when no event is queued. It also
// matches unix.EAGAIN. TryGetEvent returns it as it is, not wrapped, so that
// errors.Is(err, ErrNoEvent) is the comparison it starts with: a poller's
// loop that drains the channel until it is empty allocates nothing (the
// interface assertions errors.Is goes on to make build their caches with
// an allocation, now and then, until an error's type has its entry).
var ErrNoEvent error = noEventError{}

type noEventError struct{}

func (noEventError) Error() string { return "cq: no completion event" }

// Is makes ErrNoEvent match unix.EAGAIN.
func (noEventError) Is(target error) bool { return target == unix.EAGAIN }

// ErrClosed is returned by operations on a closed Channel or CQ. It is
// uverbs.ErrClosed, the one sentinel for every package.
var ErrClosed = uverbs.ErrClosed

// A GetEvent on an idle channel reads before it polls now and then, to find
// out whether events have started to queue up: at the probeFirst-th idle
// wait, then at twice as many waits each time while the probes find
// nothing, up to one in probeMax. A probe that misses costs a read, so a
// channel whose events seldom queue probes seldom (on Linux 6.12 a fixed
// one in eight missed two times in three).
const (
	probeFirst = 8
	probeMax   = 64
)

// probes says whether the idle-th wait since events were last found
// queued reads first.
func probes(idle uint32) bool {
	if idle >= probeMax {
		return idle%probeMax == 0
	}
	return idle >= probeFirst && idle&(idle-1) == 0
}

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
	dev *uverbs.Context     // the device, nil for a test source: GetEvent ends once it is removed
	src eventSource

	mu sync.Mutex
	// cqs holds the channel's CQs by the user handle given to the kernel,
	// weakly, so that a CQ the program drops is collected (its ring
	// unmapped, the leak reported) while the channel lives on. A reserved
	// slot, whose CQ is being created, holds the zero weak.Pointer.
	cqs map[uint64]weak.Pointer[CQ]
	// few is cqs as a list while it has at most fewCQs entries, else nil:
	// rebuilt under mu whenever cqs changes, never changed once published.
	// tryGet scans it without mu: the lock and a map lookup cost about 60
	// instructions an event, 3 % of a latency loop's user-space work.
	few atomic.Pointer[[]cqSlot]

	// waiters is read-held by every GetEvent/TryGetEvent; Close takes it
	// for writing, after closing the poller (which wakes the waits), so
	// that the channel fd is not closed under a poll or a read.
	waiters sync.RWMutex
	closing atomic.Bool
	poller  *fdwait.Poller  // what GetEvent waits on the channel fd with
	watch   leakcheck.Watch // closes poller if the Channel is dropped unclosed
	closed  bool

	// registered is set once a GetEvent wait has registered the fds with
	// poller (see register); regMu orders the registering.
	registered atomic.Bool
	regMu      sync.Mutex

	// idle is 0 while GetEvent finds events already queued, so that it
	// starts with the read (one system call, like ibv_get_cq_event);
	// after a read that found none it counts waits, which start with the
	// poll instead of a read that would only say EAGAIN (poll and read:
	// two calls, not three). A TryGetEvent that finds none counts as
	// such a read. A guess, updated without synchronisation; either order
	// is correct.
	idle atomic.Uint32
}

// NewChannel creates a completion channel on devctx's device.
func NewChannel(devctx *uverbs.Context) (*Channel, error) {
	cc, err := devctx.CreateCompChannel()
	if err != nil {
		return nil, err
	}
	ch, err := newChannel(cc, devctx)
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

// newChannel makes the Channel of src, on devctx's device (nil for none:
// a test's source).
func newChannel(src eventSource, devctx *uverbs.Context) (*Channel, error) {
	ch := &Channel{dev: devctx, src: src, cqs: make(map[uint64]weak.Pointer[CQ])}
	ch.changed()
	// Ppoll: every completion of an event-driven loop pays the wake-up,
	// and the runtime's poller costs more (see package fdwait).
	p, err := fdwait.New(fdwait.Ppoll)
	if err != nil {
		return nil, fmt.Errorf("cq: %w", err)
	}
	ch.poller = p
	// A dropped Channel's poller is closed, which also takes its armed
	// waker off its context: a context that is never done would keep it
	// alive.
	ch.watch = leakcheck.Object(ch, "cq.Channel", func(p *fdwait.Poller) { p.Close() }, p)
	return ch, nil
}

// FD returns the channel's fd: non-blocking, readable when an event is
// queued (for epoll). Read events with TryGetEvent, not from the fd. A
// caller that waits with a deadline of its own (a socket's) waits on FD
// with an fdwait.Poller, then calls TryGetEvent; see package fdwait. The
// channel puts the fd in no epoll set of its own until a GetEvent waits.
func (ch *Channel) FD() int { return ch.src.FD() }

// TryGetEvent returns the CQ of the next queued event without blocking, or
// ErrNoEvent. The event must be acknowledged with the
// CQ's Ack. It allocates nothing.
func (ch *Channel) TryGetEvent() (*CQ, error) {
	ch.waiters.RLock()
	if ch.closing.Load() {
		ch.waiters.RUnlock()
		return nil, ErrClosed
	}
	// No defer: tryGet runs no caller code, and a deferred call is a
	// tenth of a hit's instructions here.
	c, err := ch.tryGet()
	if err == ErrNoEvent && ch.idle.Load() == 0 {
		// The caller just looked: GetEvent, if it is next, need not.
		ch.idle.Store(1)
	}
	ch.waiters.RUnlock()
	return c, err
}

func (ch *Channel) tryGet() (*CQ, error) {
	for {
		h, err := ch.src.ReadEvent()
		if err != nil {
			if noEvent(err) {
				return nil, ErrNoEvent
			}
			return nil, err
		}
		w, ok := ch.slot(h)
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

// cqSlot is one entry of Channel.few.
type cqSlot struct {
	h  uint64
	cq weak.Pointer[CQ]
}

// fewCQs is how many CQs a channel lists for tryGet; one with more uses
// the map under mu.
const fewCQs = 8

// slot is cqs[h], from the list when there is one.
func (ch *Channel) slot(h uint64) (weak.Pointer[CQ], bool) {
	if few := ch.few.Load(); few != nil {
		for _, s := range *few {
			if s.h == h {
				return s.cq, true
			}
		}
		return weak.Pointer[CQ]{}, false
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	w, ok := ch.cqs[h]
	return w, ok
}

// changed publishes cqs anew for slot, under mu.
func (ch *Channel) changed() {
	if len(ch.cqs) > fewCQs {
		ch.few.Store(nil)
		return
	}
	few := make([]cqSlot, 0, len(ch.cqs))
	for h, w := range ch.cqs {
		few = append(few, cqSlot{h, w})
	}
	ch.few.Store(&few)
}

// noEvent is whether ReadEvent's err says that no event is queued. It
// looks for uverbs' error with a concrete type assertion: the interface
// assertions inside errors.Is build their caches (an allocation) at a
// random one in about a thousand calls until a type has its entry, which
// a caller's measured loop, whose looks miss, would meet.
func noEvent(err error) bool {
	if e, ok := err.(*uverbs.Error); ok {
		return e.Errno == unix.EAGAIN
	}
	return errors.Is(err, unix.EAGAIN)
}

// GetEvent waits for the next event and returns its CQ. It returns
// ctx.Err() once ctx is done, ErrClosed once the channel is closed
// (every blocked GetEvent wakes) and, once the device is found removed
// and no event is queued, the *uverbs.DeviceRemovedError
// (uverbs.ErrDeviceRemoved). The event must be acknowledged with the
// CQ's Ack.
//
// Its cost is that of ibv_get_cq_event plus at most one system call: an
// event already queued is one non-blocking read; otherwise it is one
// fdwait.Poller wait, then the read. With a context that cannot be
// cancelled (context.Background) the wait is one epoll_pwait2(2) on an
// epoll set the first such wait built, holding the channel fd, the device's
// removal eventfd and the eventfd Close signals; with one that can, it is
// a ppoll(2) on those fds and an eventfd signalled when ctx is done (see
// fdwait.Poller.Register). It allocates nothing: a cancellable
// context is registered by the first wait with it and stays registered for
// the next ones, until it is done, a wait passes another context, or the
// channel is closed. The wait occupies an OS thread, so a program waiting
// on many channels should put their FDs into one epoll set instead.
func (ch *Channel) GetEvent(ctx context.Context) (*CQ, error) {
	ch.waiters.RLock()
	defer ch.waiters.RUnlock()
	if ch.closing.Load() {
		return nil, ErrClosed
	}
	// Read first when events have been found queued, and on the waits
	// that probe while they have not, to notice a backlog.
	n := ch.idle.Load()
	if n == 0 || probes(n) {
		c, err := ch.tryGet()
		if err != ErrNoEvent {
			if n != 0 {
				ch.idle.Store(0)
			}
			return c, err
		}
	}
	ch.idle.Store(n + 1)
	if ctx.Done() == nil && !ch.registered.Load() {
		if err := ch.register(); err != nil {
			return nil, err
		}
	}
	for {
		switch err := ch.poller.Wait(ctx, time.Time{}, ch.src.FD(), ch.removalFD()); {
		case err == nil:
		case errors.Is(err, fdwait.ErrClosed):
			return nil, ErrClosed
		case err == ctx.Err():
			return nil, err
		default:
			if ch.closing.Load() {
				return nil, ErrClosed
			}
			return nil, fmt.Errorf("cq: wait on completion channel: %w", err)
		}
		c, err := ch.tryGet()
		if err != ErrNoEvent {
			return c, err
		}
		if ch.dev != nil {
			if err := ch.dev.Err(); err != nil {
				return nil, err
			}
		}
		// Another waiter took the event.
	}
}

// register registers the fds GetEvent waits on with its poller, once:
// its waits without a cancellable context are then one epoll_pwait2 on a
// set built once, not a ppoll that sets up its poll table every time.
// It is done by the first such wait, not when the channel is made: an fd
// in an epoll set costs every event epoll's wake-up callback, and a
// channel whose events are waited for elsewhere (its FD in the caller's
// own poller, then TryGetEvent) would pay it for nothing.
func (ch *Channel) register() error {
	ch.regMu.Lock()
	defer ch.regMu.Unlock()
	if ch.registered.Load() {
		return nil
	}
	switch err := ch.poller.Register(ch.src.FD(), ch.removalFD()); {
	case errors.Is(err, fdwait.ErrClosed):
		return ErrClosed
	case err != nil:
		return fmt.Errorf("cq: wait on completion channel: %w", err)
	}
	ch.registered.Store(true)
	return nil
}

// removalFD is the fd that becomes readable when the channel's device is
// removed, -1 for none (poll skips it).
func (ch *Channel) removalFD() int {
	if ch.dev == nil {
		return -1
	}
	return ch.dev.RemovalFD()
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
	ch.changed()
	return h, nil
}

// add records c in its reserved slot. The slot stays after c is collected
// without Close (the leak check reports that), so that an event the
// kernel still queues for it is told from one for an unknown handle.
func (ch *Channel) add(h uint64, c *CQ) {
	ch.mu.Lock()
	ch.cqs[h] = weak.Make(c)
	ch.changed()
	ch.mu.Unlock()
}

func (ch *Channel) remove(h uint64) {
	ch.mu.Lock()
	delete(ch.cqs, h)
	ch.changed()
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
// closes the source and the poller: Close once no CQ uses the channel,
// and the Context's Close whatever uses it (the kernel keeps the channel
// alive for its CQs, which go with the Context).
func (ch *Channel) shutdown() error {
	ch.mu.Lock()
	ch.closing.Store(true)
	ch.mu.Unlock()
	// Every GetEvent returns, and none starts a poll, once the poller's
	// Close has begun; it returns when they have left it.
	ch.poller.Close()
	ch.waiters.Lock()
	defer ch.waiters.Unlock()
	if ch.closed {
		return nil
	}
	ch.closed = true
	ch.watch.Closed()
	return ch.src.Close()
}
