package rxe

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/pureverbs/pureverbs/rxe/internal/ring"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// doorbell tells the kernel that a send queue has new WQEs: an empty
// POST_SEND command (*uverbs.QP's PostSendDoorbell). Without it rdma_rxe
// never looks at the send ring.
type doorbell interface {
	PostSendDoorbell() error
}

// producer is what a send and a receive queue share: the ring they write
// WQEs into, the index past the last one published, the granted depth,
// and the device whose removal stops posting, under the lock every post
// and every change of the ring holds.
type producer struct {
	mu    sync.Mutex
	ring  *ring.Ring // nil once closed
	prod  uint32
	maxWR int
	dev   *uverbs.Context // the device, nil over simulated rings: posts stop once it is removed
}

// lock checks that the device is still there and takes the lock every
// post holds.
func (p *producer) lock() error {
	if err := deviceErr(p.dev); err != nil {
		return err
	}
	p.mu.Lock()
	return nil
}

// write writes n requests past the producer index, where the kernel does
// not look, and publishes them with one producer store only if every
// request was valid: a call posts all of them or none. encode checks
// request i and writes it into slot. closed is the queue's error once it
// is closed. The caller holds p.mu.
func (p *producer) write(n int, closed error, encode func(slot unsafe.Pointer, i int) error) error {
	r := p.ring
	if r == nil {
		return closed
	}
	if n > room(r, p.prod, p.maxWR) {
		return ErrQueueFull
	}
	idx := p.prod
	for i := range n {
		if err := encode(r.At(idx), i); err != nil {
			return err
		}
		idx = r.Next(idx)
	}
	p.prod = idx
	r.SetProducer(idx) // publishes the WQEs: all written before this store
	return nil
}

// writeFilled is write for requests that fill, the caller's code, writes
// one at a time into scratch, the queue's own request. The caller holds
// p.mu and releases it in a deferred call, which also runs if fill
// panics. scratch is cleared after each encode, under that lock (a clear
// after the post returned would race with the next post's fill): it keeps
// no caller memory alive.
func writeFilled[W any](p *producer, n int, closed error, scratch *W, fill func(i int, w *W), encode func(slot unsafe.Pointer, w *W, i int) error) error {
	return p.write(n, closed, func(slot unsafe.Pointer, i int) error {
		defer func() {
			var zero W
			*scratch = zero
		}()
		fill(i, scratch)
		return encode(slot, scratch, i)
	})
}

// sendQueue is the producer side of a send ring.
type sendQueue struct {
	producer
	ssn       uint32
	maxSGE    int
	maxInline int
	caps      opCaps // optional opcodes the device executes
	db        doorbell
	typ       uverbs.QPType // the QP's transport; 0 (simulator) follows RC
	maxUD     uint32        // UD only: the largest payload (the port's MTU)
	scratch   SendWR        // the request postFunc checks and encodes, under mu
}

// post writes the WQEs and publishes them all or none (see write). It then
// rings the doorbell once, still holding the lock, so that detach (which
// takes the lock before the kernel QP is destroyed) can never let a
// doorbell reach a destroyed QP or a handle the kernel has since reused.
//
// Once the producer index is published the kernel may consume the WQEs at
// any time (rxe's requester also runs from its own timers and ACKs), so they
// cannot be taken back: a failed doorbell is reported as ErrDoorbell, which
// says the requests are queued. The requests are encoded from wrs where
// they are, not copied first.
//
// The lock is released without defer: nothing here runs a caller's code,
// and a deferred call is 15 instructions of a post's few hundred.
func (q *sendQueue) post(wrs []SendWR) error {
	if len(wrs) == 0 {
		return nil
	}
	if err := q.lock(); err != nil {
		return err
	}
	err := q.write(len(wrs), errSendQueueClosed, func(slot unsafe.Pointer, i int) error {
		return q.encode(slot, &wrs[i], i)
	})
	if err == nil {
		err = q.ringDoorbell(len(wrs))
	}
	q.mu.Unlock()
	return err
}

// postFunc is post for n requests that fill writes, one at a time, into
// the queue's scratch request (see QP.PostSendFunc).
func (q *sendQueue) postFunc(n int, fill func(i int, w *SendWR)) error {
	if n <= 0 {
		return nil
	}
	if err := q.lock(); err != nil {
		return err
	}
	defer q.mu.Unlock()
	if err := writeFilled(&q.producer, n, errSendQueueClosed, &q.scratch, fill, q.encode); err != nil {
		return err
	}
	return q.ringDoorbell(n)
}

// encode checks w and writes it into slot as the call's i-th request.
func (q *sendQueue) encode(slot unsafe.Pointer, w *SendWR, i int) error {
	length, err := q.check(w)
	if err != nil {
		return err
	}
	if err := q.checkLength(length); err != nil {
		return err
	}
	encodeSend(slot, w, length, q.ssn+uint32(i))
	if q.typ == uverbs.QPTypeUD {
		encodeUD(slot, w)
	}
	return nil
}

// ringDoorbell counts the n requests just published and rings the
// doorbell once.
func (q *sendQueue) ringDoorbell(n int) error {
	q.ssn += uint32(n)
	if err := q.db.PostSendDoorbell(); err != nil {
		return &DoorbellError{Err: err}
	}
	return nil
}

// detach stops all further posting; it waits for a post (and its doorbell)
// under way. destroy runs while the lock is held, so no doorbell can slip
// in between; if it fails, the queue stays attached and usable.
func (q *sendQueue) detach(destroy func() error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if destroy != nil {
		if err := destroy(); err != nil {
			return err
		}
	}
	q.ring = nil
	return nil
}

// check validates wr against the queue's limits and returns its length.
func (q *sendQueue) check(wr *SendWR) (uint32, error) {
	if err := q.checkTransport(wr); err != nil {
		return 0, err
	}
	if wr.Flags&^knownSendFlags != 0 {
		return 0, ErrInvalidWR
	}
	switch wr.Opcode {
	case OpSend, OpSendWithImm, OpRDMAWrite, OpRDMAWriteWithImm, OpRDMARead, OpSendWithInv:
	default:
		n, ok, err := q.checkExt(wr)
		if !ok {
			return 0, ErrInvalidWR
		}
		return n, err
	}
	if wr.Flags&Inline != 0 {
		if len(wr.SGEs) != 0 || wr.Opcode == OpRDMARead {
			return 0, ErrInvalidWR
		}
		if len(wr.Inline) > q.maxInline {
			return 0, ErrInlineTooLong
		}
		return uint32(len(wr.Inline)), nil
	}
	if len(wr.SGEs) > q.maxSGE {
		return 0, ErrTooManySGEs
	}
	return sgeTotal(wr.SGEs)
}

// recvQueue is the producer side of a receive ring.
type recvQueue struct {
	producer
	maxSGE  int
	scratch RecvWR // the request postFunc checks and encodes, under mu
}

// post writes the WQEs and publishes them all or none (see write). The
// kernel notices new receives by itself: no syscall. As in the send
// queue's post, no defer.
func (q *recvQueue) post(wrs []RecvWR) error {
	if len(wrs) == 0 {
		return nil
	}
	if err := q.lock(); err != nil {
		return err
	}
	err := q.write(len(wrs), errRecvQueueClosed, func(slot unsafe.Pointer, i int) error {
		return q.encode(slot, &wrs[i], i)
	})
	q.mu.Unlock()
	return err
}

// postFunc is post for n requests that fill writes, one at a time, into
// the queue's scratch request (see QP.PostRecvFunc).
func (q *recvQueue) postFunc(n int, fill func(i int, w *RecvWR)) error {
	if n <= 0 {
		return nil
	}
	if err := q.lock(); err != nil {
		return err
	}
	defer q.mu.Unlock()
	return writeFilled(&q.producer, n, errRecvQueueClosed, &q.scratch, fill, q.encode)
}

// encode checks w and writes it into slot.
func (q *recvQueue) encode(slot unsafe.Pointer, w *RecvWR, _ int) error {
	if len(w.SGEs) > q.maxSGE {
		return ErrTooManySGEs
	}
	length, err := sgeTotal(w.SGEs)
	if err != nil {
		return err
	}
	encodeRecv(slot, w, length)
	return nil
}

// deviceErr is the removal error of dev (a *uverbs.DeviceRemovedError),
// nil while it is there or for simulated rings: one atomic load.
func deviceErr(dev *uverbs.Context) error {
	if dev == nil {
		return nil
	}
	return dev.Err()
}

// newQueues sets up the send and receive queues of a QP over their rings,
// clipping the limits to what a slot holds. rq is nil for a QP on an SRQ.
//
// The caps' WR counts are how many requests may be outstanding on each
// queue. The rings may have more slots (6.1's rxe grants what was asked and
// rounds the ring up to a power of two); posting stops at the granted
// depth, so a CQ sized by the caps cannot overflow. 0 means the ring's
// capacity.
func newQueues(sq, rq *ring.Ring, lim uverbs.QPCap, db doorbell) (*sendQueue, *recvQueue, error) {
	if sq == nil || db == nil {
		return nil, nil, fmt.Errorf("rxe: a QP needs a send ring and a doorbell: %w", unix.EINVAL)
	}
	slotRoom := sq.ElemSize() - sendWQESize
	if slotRoom < 0 {
		return nil, nil, fmt.Errorf("%w: send slots of %d bytes, want at least %d", ErrBadRing, sq.ElemSize(), sendWQESize)
	}
	s := &sendQueue{
		producer:  producer{ring: sq, prod: sq.Producer(), maxWR: depth(int(lim.MaxSendWR), sq)},
		maxSGE:    min(int(lim.MaxSendSGE), slotRoom/sgeSize),
		maxInline: min(int(lim.MaxInlineData), slotRoom),
		db:        db,
	}
	if rq == nil {
		return s, nil, nil
	}
	slotRoom = rq.ElemSize() - recvWQESize
	if slotRoom < 0 {
		return nil, nil, fmt.Errorf("%w: receive slots of %d bytes, want at least %d", ErrBadRing, rq.ElemSize(), recvWQESize)
	}
	return s, &recvQueue{producer: producer{ring: rq, prod: rq.Producer(), maxWR: depth(int(lim.MaxRecvWR), rq)}, maxSGE: min(int(lim.MaxRecvSGE), slotRoom/sgeSize)}, nil
}

// depth is the granted queue depth, at most what the ring holds.
func depth(granted int, r *ring.Ring) int {
	if granted <= 0 || granted > r.Capacity() {
		return r.Capacity()
	}
	return granted
}

// room is how many more WQEs a producer at prod may write: what the ring
// has free, within the granted depth.
func room(r *ring.Ring, prod uint32, depth int) int {
	cons := r.Consumer()
	return min(r.Room(prod, cons), depth-r.Count(prod, cons))
}
