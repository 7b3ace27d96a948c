package qp

import (
	"cmp"
	"fmt"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// allAttrs is every attribute bit QUERY_QP knows.
const allAttrs AttrMask = 1<<21 - 1

// Defaults for zero Cap fields.
const (
	defaultWR  = 128
	defaultSGE = 1
)

// Spec describes a queue pair to create.
type Spec struct {
	Type   Type // RC, UC or UD
	SendCQ *cq.CQ
	RecvCQ *cq.CQ
	// Cap is what to ask for; zero WR counts mean 128 and zero SGE counts
	// mean 1. The device may grant more (see QP.Cap).
	Cap Cap
	// SigAll makes every send generate a completion, Signaled or not.
	SigAll bool
	// UserHandle is reported with the QP's async events; 0 lets the
	// Context pick a unique one, so that events resolve to the QP.
	UserHandle uint64
	// SRQ, if set, is the shared receive queue the QP receives from: it
	// then has no receive queue of its own (Cap's receive fields are
	// ignored and PostRecv returns ErrSRQAttached).
	SRQ *SRQ
}

// QP is a queue pair. PostSend and PostRecv may be called from several
// goroutines and allocate nothing; Modify and the transition helpers may be
// too, but their order is the caller's to choose.
type QP struct {
	core  *rxe.QP
	srq   *SRQ // nil unless created on an SRQ
	typ   Type
	cap   Cap
	num   uint32
	state atomic.Uint32 // State as last set by Modify or seen by Query
}

// New creates a queue pair in the RESET state on pd's device.
func New(pd *uverbs.PD, attr Spec) (*QP, error) {
	if attr.Type != RC && attr.Type != UC && attr.Type != UD {
		return nil, fmt.Errorf("qp: create: %v queue pairs: %w", attr.Type, ErrNotSupported)
	}
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, fmt.Errorf("qp: create: a send and a receive CQ are required: %w", unix.EINVAL)
	}
	c := attr.Cap.withDefaults()
	var srq *uverbs.SRQ
	if attr.SRQ != nil {
		srq = attr.SRQ.Verbs()
		c.MaxRecvWR, c.MaxRecvSGE = 0, 0
	}
	q := &QP{srq: attr.SRQ, typ: attr.Type}
	core, err := rxe.CreateQP(pd, uverbs.QPSpec{
		Owner:      q,
		SRQ:        srq,
		Type:       uverbs.QPType(attr.Type),
		SendCQ:     attr.SendCQ.Verbs(),
		RecvCQ:     attr.RecvCQ.Verbs(),
		Cap:        uverbs.QPCap(c),
		SigAll:     attr.SigAll,
		UserHandle: attr.UserHandle,
	})
	if err != nil {
		return nil, err
	}
	v := core.Verbs()
	q.core, q.cap, q.num = core, Cap(v.Cap()), v.Num()
	if q.srq != nil {
		q.cap.MaxRecvWR, q.cap.MaxRecvSGE = 0, 0
	}
	return q, nil
}

// withDefaults is c with its zero WR and SGE counts replaced by the
// defaults Spec.Cap documents.
func (c Cap) withDefaults() Cap {
	c.MaxSendWR = cmp.Or(c.MaxSendWR, defaultWR)
	c.MaxRecvWR = cmp.Or(c.MaxRecvWR, defaultWR)
	c.MaxSendSGE = cmp.Or(c.MaxSendSGE, defaultSGE)
	c.MaxRecvSGE = cmp.Or(c.MaxRecvSGE, defaultSGE)
	return c
}

// Num is the QP number peers address.
func (q *QP) Num() uint32 { return q.num }

// PD is the protection domain the QP was created in: a UD QP's address
// handles and the memory its work requests name must be in it.
func (q *QP) PD() *uverbs.PD { return q.core.Verbs().PD() }

// SRQ is the shared receive queue the QP was created on, or nil.
func (q *QP) SRQ() *SRQ { return q.srq }

// Type is the QP's transport.
func (q *QP) Type() Type { return q.typ }

// Cap is the capacity the device granted.
func (q *QP) Cap() Cap { return q.cap }

// State is the state the QP was last moved to (or found in by Query). The
// kernel may move a QP to StateError by itself, after a failed request; Query
// tells.
func (q *QP) State() State { return State(q.state.Load()) }

// Modify changes the attributes mask selects (ibv_modify_qp).
func (q *QP) Modify(attr *Attr, mask AttrMask) error {
	v := attr.verbs()
	if err := q.core.Verbs().Modify(&v, uverbs.QPAttrMask(mask)); err != nil {
		return err
	}
	if mask&AttrState != 0 {
		q.state.Store(uint32(attr.State))
	}
	return nil
}

// Query returns the QP's current attributes from the kernel.
func (q *QP) Query() (Attr, error) {
	v, _, err := q.core.Verbs().Query(uverbs.QPAttrMask(allAttrs))
	if err != nil {
		return Attr{}, err
	}
	attr := AttrFromVerbs(&v)
	q.state.Store(uint32(attr.State))
	return attr, nil
}

// PostSend posts send work requests: one WQE each into the send ring, then
// one doorbell for the whole call. It is all or nothing: if any request is
// invalid or the ring lacks room for all of them, none is posted and the
// error says why (ErrQueueFull, ErrTooManySGEs, ErrInlineTooLong,
// ErrInvalidWR; ErrClosed for a UD request whose AH is closed). If every
// request was queued and only the doorbell command failed, the error
// matches ErrDoorbell: the requests may still execute and must not be
// posted again. Before RTS it returns ErrBadState.
// PostSend never rings a doorbell on a QP that Close has destroyed. It
// allocates nothing.
//
// The memory an SGE names belongs to the device until a completion for
// that request, or for a later signaled one, has been polled; room in the
// send queue alone does not say so. Inline data is copied at post time.
func (q *QP) PostSend(wrs []SendWR) error {
	if q.State() < StateRTS {
		return q.badState()
	}
	if len(wrs) == 1 {
		// The common case: the provider's request built on the stack, where
		// writing it needs no write barriers, and encoded from there.
		var w [1]rxe.SendWR
		wrs[0].fill(&w[0])
		return ownError(q.core.PostSend(w[:]))
	}
	return ownError(q.core.PostSendFunc(len(wrs), func(i int, w *rxe.SendWR) { wrs[i].fill(w) }))
}

// PostRecv posts receive work requests into the receive ring: a memory
// operation, no system call. It is all or nothing like PostSend, returns
// ErrBadState in RESET, ErrSRQAttached on a QP created on an SRQ, and
// allocates nothing.
func (q *QP) PostRecv(wrs []RecvWR) error {
	if q.srq != nil {
		return ErrSRQAttached
	}
	if q.State() == StateReset {
		return q.badState()
	}
	if len(wrs) == 1 {
		// As in PostSend.
		w := [1]rxe.RecvWR{rxe.RecvWR(wrs[0])}
		return ownError(q.core.PostRecv(w[:]))
	}
	return ownError(q.core.PostRecvFunc(len(wrs), func(i int, w *rxe.RecvWR) { *w = rxe.RecvWR(wrs[i]) }))
}

// badState is ErrBadState, or ErrClosed for a QP that is closed (by Close
// or its Context's): whatever state it was left in, it is gone.
func (q *QP) badState() error {
	if q.core.Closed() {
		return ErrClosed
	}
	return ErrBadState
}

// closedError is ErrClosed, naming verb, for a QP that is closed (by
// Close or its Context's), or nil: the transitions check it before the
// state or their parameters, which cannot matter any more (Connect first
// refuses a UD QP, whose type never changes).
func (q *QP) closedError(verb string) error {
	if q.core.Closed() {
		return fmt.Errorf("qp: %s: %w", verb, ErrClosed)
	}
	return nil
}

// Close destroys the queue pair and unmaps its rings. It is idempotent; a
// failed destroy may be retried.
func (q *QP) Close() error {
	err := q.core.Close()
	return err
}

// Verbs returns the kernel-object layer's QP under q, for what this package
// does not wrap. (An async event about q names q itself as its Object.)
func (q *QP) Verbs() *uverbs.QP { return q.core.Verbs() }
