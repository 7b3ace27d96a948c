package qp

import (
	"cmp"
	"fmt"

	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
)

// SRQAttr holds a shared receive queue's attributes.
type SRQAttr struct {
	MaxWR  uint32 // receive requests the SRQ holds
	MaxSGE uint32 // SGEs per receive request (fixed at creation)
	// Limit arms the limit event: once fewer than Limit requests remain
	// after the device took one, the Context's async event stream gets an
	// uverbs.EventSRQLimitReached for the SRQ and the limit drops back to 0
	// (disarmed). 0 means not armed.
	Limit uint32
}

// SRQ is a shared receive queue: the QPs created on it (Spec.SRQ) take
// their receive requests from it, whichever receives first. PostRecv may
// be called from several goroutines and allocates nothing.
type SRQ struct {
	core *rxe.SRQ
}

// NewSRQ creates a shared receive queue on pd's device. Zero MaxWR means
// 128 and zero MaxSGE means 1; a non-zero Limit arms the limit event at
// once. The device may grant more (see Cap).
func NewSRQ(pd *uverbs.PD, attr SRQAttr) (*SRQ, error) {
	attr.MaxWR = cmp.Or(attr.MaxWR, defaultWR)
	attr.MaxSGE = cmp.Or(attr.MaxSGE, defaultSGE)
	s := &SRQ{}
	core, err := rxe.CreateSRQ(pd, uverbs.SRQSpec{Attr: uverbs.SRQAttr(attr), Owner: s})
	if err != nil {
		return nil, err
	}
	s.core = core
	return s, nil
}

// Num is the SRQ number the kernel assigned.
func (s *SRQ) Num() uint32 { return s.core.Num() }

// Cap returns how many requests the SRQ takes (its depth, which a resize
// changes) and how many SGEs each may have.
func (s *SRQ) Cap() (maxWR, maxSGE int) { return s.core.Limits() }

// Verbs returns the kernel SRQ; an async event's SRQ field is this value.
func (s *SRQ) Verbs() *uverbs.SRQ { return s.core.Verbs() }

// PostRecv posts receive requests to the SRQ: a memory operation, no
// system call. It is all or nothing (ErrQueueFull, ErrTooManySGEs,
// ErrInvalidWR) and allocates nothing.
func (s *SRQ) PostRecv(wrs []RecvWR) error {
	return ownError(s.core.PostRecvFunc(len(wrs), func(i int, w *rxe.RecvWR) { *w = rxe.RecvWR(wrs[i]) }))
}

// SetLimit arms the limit event (ibv_modify_srq with IBV_SRQ_LIMIT): once
// the device takes a request and fewer than limit remain, the context's
// async event stream gets one uverbs.EventSRQLimitReached for this SRQ and
// the limit drops back to 0, so that it fires once per arming. rdma_rxe
// refuses a limit above the ring's capacity.
func (s *SRQ) SetLimit(limit uint32) error {
	return s.core.Modify(uverbs.SRQAttr{Limit: limit}, uverbs.SRQLimit)
}

// Resize changes the SRQ's depth to at least maxWR requests (ibv_modify_srq
// with IBV_SRQ_MAX_WR). The requests already posted stay posted; rdma_rxe
// refuses a depth below them or below an armed limit.
func (s *SRQ) Resize(maxWR uint32) error {
	if maxWR == 0 {
		return fmt.Errorf("qp: resize SRQ to 0 requests: %w", ErrInvalidWR)
	}
	return s.core.Modify(uverbs.SRQAttr{MaxWR: maxWR}, uverbs.SRQMaxWR)
}

// Query returns the SRQ's attributes from the kernel: rdma_rxe reports the
// ring's capacity as MaxWR, and Limit 0 once the limit event has fired.
func (s *SRQ) Query() (SRQAttr, error) {
	a, err := s.core.Verbs().Query()
	return SRQAttr(a), err
}

// Close destroys the SRQ and unmaps its ring. Close the QPs on it first
// (the kernel answers EBUSY). Idempotent; a failed destroy may be retried.
func (s *SRQ) Close() error {
	err := s.core.Close()
	return err
}
