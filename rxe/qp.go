package rxe

import (
	"errors"
	"fmt"
	"runtime"
	"weak"

	"github.com/pureverbs/pureverbs/rxe/internal/ring"
	"github.com/pureverbs/pureverbs/uverbs"
)

// QP is an rxe queue pair: the kernel object and its send and receive rings.
// PostSend and PostRecv may be called from several goroutines; each queue
// is serialised by its own lock.
type QP struct {
	sq    *sendQueue
	rq    *recvQueue
	vqp   *uverbs.QP // nil for a QP over simulated rings
	sqMem *mapping
	rqMem *mapping
}

// CreateQP creates a queue pair on an rxe device and maps its receive and
// send rings from the driver's response (struct rxe_create_qp_resp). The
// per-request limits are the caps the kernel granted. RC, UC and UD queue
// pairs are supported; a UD QP refuses sends longer than the port's active
// MTU, as read here. If any step fails, the steps before it are undone.
// A device whose kernel driver is not rdma_rxe is refused with
// ErrNotSupported naming the driver.
func CreateQP(pd *uverbs.PD, attr uverbs.QPSpec) (*QP, error) {
	if err := checkDriver("create_qp", pd.Context().Device()); err != nil {
		return nil, err
	}
	// The 6.2+ opcodes are refused before posting where the device lacks
	// them (on 6.1 rxe would fail the QP with LOC_QP_OP_ERR instead); a QP
	// made without knowing would refuse them everywhere.
	dev, err := pd.Context().QueryDevice()
	if err != nil {
		return nil, fmt.Errorf("rxe: create_qp: query the device's optional opcodes: %w", err)
	}
	var maxUD uint32
	switch attr.Type {
	case uverbs.QPTypeRC, uverbs.QPTypeUC:
	case uverbs.QPTypeUD:
		if maxUD, err = udMaxMessage(pd.Context()); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("rxe: create_qp: %v QP: %w", attr.Type, ErrNotSupported)
	}
	var resp createQPResp
	vqp, err := pd.CreateQP(attr, asBytes(&resp))
	if err != nil {
		return nil, err
	}
	q, err := mapQP(pd.Context().Mmap, vqp, &resp, attr.SRQ == nil)
	if err != nil {
		if derr := vqp.Close(); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	q.sq.caps = opCapsFrom(dev.DeviceCapFlags)
	q.sq.typ, q.sq.maxUD = attr.Type, maxUD
	q.sq.dev = pd.Context()
	if q.rq != nil {
		q.rq.dev = pd.Context()
	}
	w := weak.Make(q)
	if err := vqp.OnContextClose(func() error {
		if q := w.Value(); q != nil {
			return q.Close()
		}
		return nil
	}); err != nil {
		return nil, err // the Context closed meanwhile; so did q
	}
	return q, nil
}

// mapQP maps the rings of a new QP (the receive ring only if hasRQ: the
// kernel makes none for a QP on an SRQ) and sets up its queues; on failure
// it unmaps what it mapped.
func mapQP(mmap mmapFunc, vqp *uverbs.QP, resp *createQPResp, hasRQ bool) (*QP, error) {
	var (
		rqMem *mapping
		rq    *ring.Ring
		err   error
	)
	if hasRQ {
		if rqMem, rq, err = mapRing(mmap, resp.rqMI); err != nil {
			return nil, fmt.Errorf("rxe: create_qp: receive queue: %w", err)
		}
	}
	sqMem, sq, err := mapRing(mmap, resp.sqMI)
	if err != nil {
		if rqMem != nil {
			rqMem.Close()
		}
		return nil, fmt.Errorf("rxe: create_qp: send queue: %w", err)
	}
	s, r, err := newQueues(sq, rq, vqp.Cap(), vqp)
	if err != nil {
		sqMem.Close()
		if rqMem != nil {
			rqMem.Close()
		}
		return nil, fmt.Errorf("rxe: create_qp: %w", err)
	}
	return &QP{sq: s, rq: r, vqp: vqp, sqMem: sqMem, rqMem: rqMem}, nil
}

// newQPFromRings makes a QP over rings a simulated kernel consumes, with
// the given limits (clipped to what a slot holds) and doorbell; it has no
// kernel object. rq may be nil, as for a QP on an SRQ.
func newQPFromRings(sq, rq *ring.Ring, lim uverbs.QPCap, db doorbell) (*QP, error) {
	s, r, err := newQueues(sq, rq, lim, db)
	if err != nil {
		return nil, err
	}
	return &QP{sq: s, rq: r}, nil
}

// PostSend writes one send WQE per request into the send ring and rings the
// doorbell once, however many requests there are. It is all or nothing: if
// any request is invalid, or the ring has no room for all of them, none is
// posted, no doorbell rings, and the error says why (ErrQueueFull,
// ErrTooManySGEs, ErrInlineTooLong, ErrInvalidWR; ErrClosed for a UD
// request whose AH is closed; the *uverbs.DeviceRemovedError once the
// device is found removed). An empty wrs does nothing. It allocates
// nothing.
func (q *QP) PostSend(wrs []SendWR) error {
	err := q.sq.post(wrs)
	runtime.KeepAlive(q) // its Mappings' cleanups would unmap the rings under the post
	return err
}

// PostSendFunc is PostSend for n requests the caller holds in a form of its
// own (package qp's SendWR): fill(i, w) writes the i-th into w, a request
// the queue owns and reuses, under the queue's lock, just before it is
// checked and encoded. fill must not keep w. It allocates nothing when fill
// does not.
func (q *QP) PostSendFunc(n int, fill func(i int, w *SendWR)) error {
	err := q.sq.postFunc(n, fill)
	runtime.KeepAlive(q) // see PostSend
	return err
}

// PostRecvFunc is PostRecv for n requests the caller holds in a form of its
// own, written by fill as in PostSendFunc.
func (q *QP) PostRecvFunc(n int, fill func(i int, w *RecvWR)) error {
	if q.rq == nil {
		return ErrSRQAttached
	}
	err := q.rq.postFunc(n, fill)
	runtime.KeepAlive(q) // see PostSend
	return err
}

// PostRecv writes one receive WQE per request into the receive ring: a
// memory operation only, no system call. Like PostSend it is all or nothing
// and allocates nothing. A QP without a receive ring (on an SRQ) returns
// ErrSRQAttached.
func (q *QP) PostRecv(wrs []RecvWR) error {
	if q.rq == nil {
		return ErrSRQAttached
	}
	err := q.rq.post(wrs)
	runtime.KeepAlive(q) // see PostSend
	return err
}

// Limits returns the limits PostSend and PostRecv enforce: the granted
// caps, clipped to what the rings hold.
func (q *QP) Limits() uverbs.QPCap {
	lim := uverbs.QPCap{MaxSendWR: uint32(q.sq.maxWR), MaxSendSGE: uint32(q.sq.maxSGE), MaxInlineData: uint32(q.sq.maxInline)}
	if q.rq != nil {
		lim.MaxRecvWR, lim.MaxRecvSGE = uint32(q.rq.maxWR), uint32(q.rq.maxSGE)
	}
	return lim
}

// Verbs returns the kernel QP (for Modify, Query, its number); nil for a QP
// of the simulator.
func (q *QP) Verbs() *uverbs.QP { return q.vqp }

// Closed reports whether the QP was closed, by Close or by its Context's
// Close.
func (q *QP) Closed() bool {
	q.sq.mu.Lock()
	defer q.sq.mu.Unlock()
	return q.sq.ring == nil
}

// Close destroys the kernel QP while holding the send queue's lock (so no
// PostSend's doorbell can reach the destroyed QP), then detaches and unmaps
// both rings. A failed destroy leaves the QP usable and may be retried;
// once it has succeeded, Close does nothing.
func (q *QP) Close() error {
	var destroy func() error
	if q.vqp != nil {
		destroy = q.vqp.Close
	}
	if err := q.sq.detach(destroy); err != nil {
		return err
	}
	return q.release()
}

// release detaches the receive queue and unmaps both rings; the send queue
// is already detached.
func (q *QP) release() (err error) {
	if q.rq != nil {
		q.rq.mu.Lock()
		q.rq.ring = nil
		q.rq.mu.Unlock()
	}
	for _, m := range []*mapping{q.sqMem, q.rqMem} {
		if m != nil {
			err = errors.Join(err, m.Close())
		}
	}
	return err
}
