package cq

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
)

// ErrUnackedEvents is returned (wrapped) by Close while events GetEvent or
// TryGetEvent returned for the CQ have not been acknowledged with Ack.
var ErrUnackedEvents = errors.New("cq: completion events not acknowledged")

// CQ is a completion queue on an rdma_rxe device. Poll, ReqNotify and Ack
// may be called from several goroutines and allocate nothing.
type CQ struct {
	core   *rxe.CQ
	ch     *Channel // nil without a completion channel
	handle uint64   // user handle the kernel reports events with

	delivered atomic.Uint64 // events returned by the channel
	acked     atomic.Uint64

	mu     sync.Mutex // serialises Close
	closed atomic.Bool
}

// New creates a completion queue of at least cqe entries on devctx's device.
// With a channel, events for it arrive there after ReqNotify.
func New(devctx *uverbs.Context, cqe int, ch *Channel) (*CQ, error) {
	c := &CQ{ch: ch}
	attr := uverbs.CQSpec{CQE: cqe, Owner: c}
	var h uint64
	if ch != nil {
		var err error
		if h, err = ch.reserve(); err != nil {
			return nil, err
		}
		attr.Channel = ch.cc
		attr.UserHandle = h
	}
	core, err := rxe.CreateCQ(devctx, attr)
	if err != nil {
		if ch != nil {
			ch.remove(h)
		}
		return nil, err
	}
	c.core, c.handle = core, h
	if ch != nil {
		ch.add(h, c)
	}
	return c, nil
}

// Poll copies up to len(wc) completions into wc and returns how many; 0
// means the queue is empty. It is a memory operation on the ring.
func (c *CQ) Poll(wc []WC) (int, error) {
	return c.core.PollFunc(len(wc), func(i int, w *rxe.WC) { wc[i].fill(w) })
}

// ReqNotify arms the CQ: the next completion (with solicitedOnly, the next
// solicited one) queues one event on the channel. A completion already in
// the queue raises none, so poll once more after arming.
func (c *CQ) ReqNotify(solicitedOnly bool) error {
	if c.closed.Load() {
		return ErrClosed
	}
	return c.core.Verbs().ReqNotify(solicitedOnly)
}

// Ack acknowledges n events the channel returned for this CQ (like
// ibv_ack_cq_events). It panics if n is negative.
func (c *CQ) Ack(n int) {
	if n < 0 {
		panic("cq: Ack of a negative count")
	}
	c.acked.Add(uint64(n))
}

// Unacked returns how many events returned for this CQ are not
// acknowledged yet.
func (c *CQ) Unacked() int {
	return int(c.delivered.Load() - c.acked.Load())
}

// Verbs returns the kernel CQ, for creating queue pairs on it.
func (c *CQ) Verbs() *uverbs.CQ { return c.core.Verbs() }

// CQE returns the number of entries the device granted.
func (c *CQ) CQE() int { return c.core.Verbs().CQE() }

// Channel returns the CQ's completion channel, or nil.
func (c *CQ) Channel() *Channel { return c.ch }

// Close destroys the CQ and unmaps its ring. It refuses with an error
// wrapping ErrUnackedEvents, and naming the count, while events are
// unacknowledged: libibverbs would block until they are, Close leaves the
// CQ usable so that the caller can Ack and close again. Events the kernel
// had queued but nobody read are discarded by the kernel. Destroy queue
// pairs using the CQ first (the kernel answers EBUSY). Idempotent.
func (c *CQ) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil
	}
	if n := c.Unacked(); n > 0 {
		return fmt.Errorf("cq: close: %d events not acknowledged: %w", n, ErrUnackedEvents)
	}
	if err := c.core.Close(); err != nil {
		return err
	}
	c.closed.Store(true)
	if c.ch != nil {
		c.ch.remove(c.handle)
	}
	return nil
}

// Resize changes the CQ to hold at least cqe completions (ibv_resize_cq);
// CQE reports the number granted afterwards. Completions already in the
// queue stay there, in order: none is lost or seen twice, and Poll calls
// from other goroutines wait while the ring is swapped. rdma_rxe refuses
// (EINVAL) a size below the number of completions pending; poll first to
// shrink a busy CQ.
func (c *CQ) Resize(cqe int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return ErrClosed
	}
	_, err := c.core.Resize(cqe)
	return err
}
