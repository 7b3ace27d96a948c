package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
	"golang.org/x/sys/unix"
)

// queue is what the receive loop needs from one connection's CQ and QP;
// verbs.go implements it on rdma_rxe, the tests on rxesim.
type queue interface {
	Poll(wc []cq.WC) (int, error)
	PostRecv(wrs []qp.RecvWR) error
	// Arm requests an event for the next completion.
	Arm() error
	// EventFD is readable when an armed CQ got a completion.
	EventFD() int
	// DrainEvents reads and acknowledges every queued event.
	DrainEvents() error
}

// ErrFlushed ends a loop whose QP went to the error state: its receives
// complete with WR_FLUSH_ERR. The sender broke the connection (a SEND
// longer than a slot, a protocol error) or the connection was torn down.
var ErrFlushed = errors.New("server: receive queue flushed (WR_FLUSH_ERR): the QP is in the error state")

// errStopped ends a loop that was told to stop.
var errStopped = errors.New("server: stopped")

// timeCheckEvery is how many empty polls pass between clock reads while
// spinning: a clock read costs more than a poll of an empty ring.
const timeCheckEvery = 32

// A draining loop (its QP going to ERROR for the next sender) stops at the
// first flush, once nothing is posted, or after drainLimit; it parks at
// most drainPoll at a time, so that the limit is seen.
const (
	drainLimit = time.Second
	drainPoll  = 10 * time.Millisecond
)

// ErrIdle ends a loop that received nothing for Config.IdleTimeout: the
// sender is presumed gone (an RC receiver never sends, so nothing else
// tells it that the sender died).
var ErrIdle = errors.New("server: no message within the idle timeout: the sender is presumed gone")

// HandlerPanicError is why a server with Config.PanicStops set stopped: its
// Handler panicked. The frame it was handling was released.
type HandlerPanicError struct {
	Value any    // what the Handler panicked with
	Stack []byte // the Handler's stack at the panic
}

func (e *HandlerPanicError) Error() string {
	return fmt.Sprintf("server: Handler panicked: %v", e.Value)
}

// loop is one connection's receive loop.
type loop struct {
	p          *pool
	q          queue
	c          *counters
	handler    func(Frame)
	frames     chan<- Frame
	spin       time.Duration
	idle       time.Duration // Config.IdleTimeout
	panicStops bool
	stop       *atomic.Bool // return at once
	drain      *atomic.Bool // the QP is going to ERROR: see drainLimit
	// draining is drain as the current step saw it.
	draining bool
	// polled is the number of completions the last step polled.
	polled int
	// tid is the OS thread the loop runs on while it runs (0 otherwise):
	// a call on that thread comes from the Handler (see Server.Close).
	tid atomic.Int32
	// running, when set, points at the server's record of its one running
	// loop, which run keeps.
	running *atomic.Pointer[loop]

	wc      []cq.WC
	batch   []qp.RecvWR // receives to post, one per slot at most
	slots   []uint32    // their slots, same order
	scratch []uint32
}

func newLoop(p *pool, q queue, c *counters, cfg *Config, frames chan<- Frame, stop, drain *atomic.Bool) *loop {
	return &loop{
		p: p, q: q, c: c, handler: cfg.Handler, frames: frames, spin: cfg.SpinBudget,
		idle: cfg.IdleTimeout, panicStops: cfg.PanicStops, stop: stop, drain: drain,
		wc:      make([]cq.WC, cfg.PollBatch),
		batch:   make([]qp.RecvWR, 0, p.depth),
		slots:   make([]uint32, 0, p.depth),
		scratch: make([]uint32, 0, p.depth),
	}
}

// postIdle posts every slot nobody holds, and the released ones: the
// connection's first receives, before RTR.
func (l *loop) postIdle() error {
	l.scratch = l.p.takeReturned(l.scratch[:0])
	l.scratch = l.p.idleSlots(l.scratch)
	for _, s := range l.scratch {
		l.queueSlot(s)
	}
	return l.flush()
}

// repost queues a slot whose completion delivered nothing, unless the QP
// is draining: then the slot stays idle for the next connection.
func (l *loop) repost(slot uint32) {
	if !l.draining {
		l.queueSlot(slot)
	}
}

// queueSlot adds slot to the next re-post.
func (l *loop) queueSlot(slot uint32) {
	l.batch = append(l.batch, l.p.recvWR(slot))
	l.slots = append(l.slots, slot)
}

// flush posts the queued receives in one call.
func (l *loop) flush() error {
	if len(l.batch) == 0 {
		return nil
	}
	if err := l.q.PostRecv(l.batch); err != nil {
		// Nothing was posted (a post is all or nothing): the slots go back
		// to idle, where the next connection's postIdle finds them.
		l.p.requeue(l.slots)
		n := len(l.batch)
		l.batch, l.slots = l.batch[:0], l.slots[:0]
		return fmt.Errorf("server: post %d receives: %w", n, err)
	}
	l.p.markPosted(l.slots)
	l.batch, l.slots = l.batch[:0], l.slots[:0]
	return nil
}

// run polls until stopped or the queue fails, on a locked OS thread. It
// returns errStopped, ErrFlushed, ErrIdle, a *HandlerPanicError or the
// error that broke it.
func (l *loop) run() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l.tid.Store(int32(unix.Gettid()))
	defer l.tid.Store(0) // before the unlock: the thread may then run others
	if l.running != nil {
		l.running.Store(l)
		defer l.running.CompareAndSwap(l, nil)
	}
	// quietSince is when the last completion was seen, read when the loop
	// is about to park (zero: one came since the last park).
	var idleSince, drainSince, quietSince time.Time
	empty := 0
	for {
		if l.stop.Load() {
			return errStopped
		}
		n, err := l.step()
		if err != nil {
			return err
		}
		if l.polled > 0 {
			quietSince = time.Time{}
		}
		if n > 0 {
			empty = 0
			idleSince = time.Time{}
			continue
		}
		if l.drain.Load() {
			// Completions still to come are flushes of posted slots; with
			// none posted, everything that arrived has been handled. rxe
			// flushes only the receives queued when the QP went to ERROR
			// (and those it finds when a late packet wakes its responder):
			// a slot posted just before the loop saw the drain may never
			// complete, so the drain gives up after drainLimit.
			if posted, _ := l.p.postedHeld(); posted == 0 {
				return errStopped
			}
			now := time.Now()
			if drainSince.IsZero() {
				drainSince = now
			} else if now.Sub(drainSince) > drainLimit {
				return errStopped
			}
		}
		if l.spin > 0 {
			if empty++; empty%timeCheckEvery != 1 {
				continue
			}
			now := time.Now()
			if idleSince.IsZero() {
				idleSince = now
			}
			if now.Sub(idleSince) < l.spin {
				continue
			}
		}
		// Idle for the whole budget.
		slept, err := l.sleep(&quietSince)
		if err != nil {
			return err
		}
		if slept {
			empty, idleSince = 0, time.Time{}
		}
	}
}

// sleep parks the loop until a completion, a Release, a wake or its idle
// or drain limit: it arms the CQ, then polls once more, since a completion
// that arrived before the arm raises no event. It reports whether it
// parked (false: it found work first). quietSince is when the last
// completion was seen (zero: one came since the last park); past
// IdleTimeout the loop ends with ErrIdle.
func (l *loop) sleep(quietSince *time.Time) (bool, error) {
	if err := l.q.Arm(); err != nil {
		return false, err
	}
	if n, err := l.step(); err != nil || n > 0 {
		return false, err
	}
	var deadline time.Time // none
	if l.idle > 0 {
		now := time.Now()
		if quietSince.IsZero() {
			*quietSince = now
		}
		left := l.idle - now.Sub(*quietSince)
		if left <= 0 {
			return false, ErrIdle
		}
		deadline = now.Add(left)
	}
	if l.drain.Load() {
		if d := time.Now().Add(drainPoll); deadline.IsZero() || deadline.After(d) {
			deadline = d
		}
	}
	if !l.p.park(l.stop) {
		return false, nil
	}
	bump(&l.c.parks, 1)
	err := l.p.waiter.Wait(context.Background(), deadline, l.q.EventFD())
	l.p.unpark()
	switch {
	case err == nil, err == fdwait.ErrWoken, errors.Is(err, os.ErrDeadlineExceeded):
	case errors.Is(err, fdwait.ErrClosed):
		return false, errStopped // the server closed its pool
	default:
		return false, fmt.Errorf("server: park: %w", err)
	}
	return true, l.q.DrainEvents()
}

// step re-posts the released slots, polls one batch, handles it and
// re-posts what it does not deliver. It returns the number of completions
// (or of released slots, so that a release counts as activity).
func (l *loop) step() (int, error) {
	// A dying QP gets no more receives: released slots wait for the next
	// connection's postIdle.
	l.draining = l.drain.Load()
	released := 0
	if !l.draining {
		l.scratch = l.p.takeReturned(l.scratch[:0])
		for _, s := range l.scratch {
			l.queueSlot(s)
		}
		released = len(l.scratch)
	}
	n, err := l.q.Poll(l.wc)
	l.polled = n
	if err != nil {
		return 0, fmt.Errorf("server: poll CQ: %w", err)
	}
	flushed := false
	var stopErr error
	for i := range l.wc[:n] {
		f, err := l.complete(&l.wc[i], stopErr != nil)
		flushed = flushed || f
		if err != nil {
			stopErr = err
		}
	}
	if n > 0 {
		posted, _ := l.p.postedHeld()
		l.c.lowWater(posted)
	}
	if err := l.flush(); err != nil {
		return 0, err
	}
	if stopErr != nil {
		return 0, stopErr
	}
	if flushed {
		return 0, ErrFlushed
	}
	return n + released, nil
}

// complete handles one completion and reports a flush, or the error of a
// Handler that panicked with PanicStops set. With stopping set (an earlier
// completion of the batch stopped the loop) a good receive is not
// delivered: its slot stays idle.
func (l *loop) complete(wc *cq.WC, stopping bool) (flushed bool, err error) {
	slot, ok := l.p.completed(wcID(wc))
	if !ok {
		bump(&l.c.badWRID, 1)
		return false, nil
	}
	switch {
	case wc.Status != cq.Success:
		l.c.status(wc.Status)
		if wc.Status == cq.WRFlushErr {
			return true, nil // stays idle: the next connection posts it
		}
		l.repost(slot)
	case wc.Opcode != cq.OpRecv || wc.Flags&cq.WithImm == 0:
		bump(&l.c.badOpcode, 1)
		l.repost(slot)
	case wc.ByteLen == 0 || int64(wc.ByteLen) > int64(l.p.size):
		bump(&l.c.badLength, 1)
		l.repost(slot)
	case stopping:
		// stays idle: the server is stopping
	default:
		f := l.p.deliver(slot, int(wc.ByteLen), wc.Imm)
		l.c.frame(f.channel, f.position, int(wc.ByteLen))
		if l.handler == nil {
			l.frames <- f // never blocks: the channel holds depth frames
			return false, nil
		}
		return false, l.call(f)
	}
	return false, nil
}

// call runs the Handler on f. A panic is recovered: it is counted, f is
// released (a no-op if the Handler had released it), and with PanicStops
// set the loop's error says what happened; otherwise the loop goes on.
func (l *loop) call(f Frame) (err error) {
	defer func() {
		if v := recover(); v != nil {
			l.c.handlerPanics.Add(1)
			f.Release()
			if l.panicStops {
				err = &HandlerPanicError{Value: v, Stack: debug.Stack()}
			}
		}
	}()
	l.handler(f)
	return nil
}
