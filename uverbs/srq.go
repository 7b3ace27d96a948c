package uverbs

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// SRQAttr holds the attributes of a shared receive queue (struct
// ibv_srq_attr).
type SRQAttr struct {
	MaxWR  uint32 // receive requests the SRQ holds
	MaxSGE uint32 // SGEs per receive request (fixed at creation)
	// Limit arms the limit event: once fewer than Limit requests remain
	// after the device took one, an EventSRQLimitReached is queued and the
	// limit drops back to 0 (disarmed). 0 means not armed.
	Limit uint32
}

// SRQAttrMask selects the SRQAttr fields ModifySRQ changes (enum
// ibv_srq_attr_mask).
type SRQAttrMask uint32

// SRQ attribute mask bits.
const (
	SRQMaxWR SRQAttrMask = 1 << 0 // IBV_SRQ_MAX_WR: resize the queue
	SRQLimit SRQAttrMask = 1 << 1 // IBV_SRQ_LIMIT: arm the limit event
)

// SRQSpec describes a shared receive queue to create.
type SRQSpec struct {
	Attr SRQAttr
	// UserHandle is reported with the SRQ's async events; 0 lets the
	// Context choose one of its own, unique among its SRQs.
	UserHandle uint64
	// Owner is what the Context's async events about the object report as
	// AsyncEvent.Object: the application-level object that wraps it
	// (package cq's *CQ, package qp's *QP or *SRQ). nil reports this
	// package's object itself.
	Owner any
}

// SRQ is the kernel side of a shared receive queue: one receive queue
// several QPs take their receive requests from. Posting to it is the
// provider's business (the rxe ring).
type SRQ struct {
	pd         *PD
	handle     uint32
	num        uint32
	attr       SRQAttr // as granted
	userHandle uint64
	owner      any // reported by async events; nil: the SRQ itself
	kid        *child
	gate       gate
	watch      leakcheck.Watch
}

// CreateSRQ creates a shared receive queue (IB_USER_VERBS_CMD_CREATE_SRQ).
// driverOut receives the driver's response (for rdma_rxe a struct
// rxe_create_srq_resp: the ring's mmap offset and size, and the SRQ number).
func (pd *PD) CreateSRQ(attr SRQSpec, driverOut []byte) (*SRQ, error) {
	const verb = "create_srq"
	if attr.Attr.MaxWR == 0 || attr.Attr.MaxWR > math.MaxInt32 {
		return nil, fmt.Errorf("uverbs: %s: max_wr %d: %w", verb, attr.Attr.MaxWR, unix.EINVAL)
	}
	if err := checkDriverData(verb, nil, len(driverOut), 4); err != nil {
		return nil, err
	}
	if !pd.gate.enter() {
		return nil, closedError(verb)
	}
	defer pd.gate.leave()
	c := pd.ctx
	uh := c.events.handle(attr.UserHandle)
	r, err := c.createSRQ(pd.handle, uh, attr.Attr, driverOut)
	if err != nil {
		return nil, err
	}
	s := &SRQ{
		pd:         pd,
		handle:     r.SRQHandle,
		num:        r.SRQN,
		attr:       SRQAttr{MaxWR: r.MaxWR, MaxSGE: r.MaxSGE, Limit: attr.Attr.Limit},
		userHandle: uh,
		owner:      attr.Owner,
	}
	s.kid = addChild(&c.kids, levelSRQ, s, (*SRQ).Close)
	s.watch = watchKernelObject(s, "SRQ", s.handle)
	c.events.addSRQ(uh, s)
	return s, nil
}

// createSRQ sends UVERBS_METHOD_SRQ_CREATE, as libibverbs 44 does, and the
// write() command only when the kernel lacks the method.
func (c *Context) createSRQ(pdHandle uint32, userHandle uint64, a SRQAttr, driverOut []byte) (createSRQResp, error) {
	const verb = "create_srq"
	var (
		r      createSRQResp
		handle *ioctlAttr
	)
	if done, err := c.tryIoctl(ioctlCreateSRQ, verb, func(driverID uint32) *ioctlBuf {
		var b *ioctlBuf
		b, handle = createSRQIoctl(driverID, pdHandle, userHandle, a, c.asyncFD.int(), &r, driverOut)
		return b
	}); done {
		if err != nil {
			return createSRQResp{}, err
		}
		r.SRQHandle = uint32(handle.Data)
		return r, nil
	}
	var resp respFrame[createSRQResp]
	var f writeFrame[createSRQCmd]
	f.req = createSRQCmd{
		Response:   resp.ptr(),
		UserHandle: userHandle,
		PDHandle:   pdHandle,
		MaxWR:      a.MaxWR,
		MaxSGE:     a.MaxSGE,
		SRQLimit:   a.Limit,
	}
	if err := execWrite(c, verb, cmdCreateSRQ, &f, &resp, nil, len(driverOut)); err != nil {
		return createSRQResp{}, err
	}
	copy(driverOut, resp.drv[:])
	return resp.resp, nil
}

// createSRQIoctl builds UVERBS_METHOD_SRQ_CREATE for a basic SRQ in
// libibverbs 44's order: the new handle (returned, for the kernel's answer
// in its Data), the type, the user handle, the PD, the sizes and limit
// asked, the async event fd when there is one, the sizes granted (into r),
// then the driver's response as UVERBS_ATTR_UHW_OUT. The SRQ number
// attribute is left out, as libibverbs does for a basic SRQ (the kernel
// fills it only for XRC; rxe's number is in its driver response).
func createSRQIoctl(driverID, pdHandle uint32, userHandle uint64, a SRQAttr, asyncFD int, r *createSRQResp, driverOut []byte) (*ioctlBuf, *ioctlAttr) {
	b := newIoctl(objectSRQ, methodSRQCreate, driverID)
	handle := b.objIn(attrCreateSRQHandle, 0)
	b.constIn(attrCreateSRQType, srqTypeBasic)
	b.u64In(attrCreateSRQUserHandle, userHandle)
	b.objIn(attrCreateSRQPDHandle, pdHandle)
	b.u32In(attrCreateSRQMaxWR, a.MaxWR)
	b.u32In(attrCreateSRQMaxSGE, a.MaxSGE)
	b.u32In(attrCreateSRQLimit, a.Limit)
	if asyncFD >= 0 {
		b.fdIn(attrCreateSRQEventFD, asyncFD)
	}
	b.ptrOut(attrCreateSRQRespMaxWR, unsafe.Pointer(&r.MaxWR), 4)
	b.ptrOut(attrCreateSRQRespMaxSGE, unsafe.Pointer(&r.MaxSGE), 4)
	if len(driverOut) > 0 {
		b.ptrOut(attrUHWOut, unsafe.Pointer(&driverOut[0]), len(driverOut))
	}
	return b, handle
}

// PD returns the protection domain of the SRQ.
func (s *SRQ) PD() *PD { return s.pd }

// Handle returns the kernel handle of the SRQ.
func (s *SRQ) Handle() uint32 { return s.handle }

// Num returns the SRQ number the kernel's core response carried: it does
// so only for XRC SRQs, so for a basic SRQ this is 0 and the driver's own
// response has the number (rxe.SRQ.Num).
func (s *SRQ) Num() uint32 { return s.num }

// UserHandle returns the handle async events of the SRQ carry.
func (s *SRQ) UserHandle() uint64 { return s.userHandle }

// Attr returns the attributes granted at creation.
func (s *SRQ) Attr() SRQAttr { return s.attr }

// OnContextClose registers the provider's Close of the SRQ (which closes
// this one and unmaps the provider's ring) for the Context's Close to
// call. It should refer to the provider's object weakly, or the Context
// keeps it alive. If the Context's Close passed the
// object before the registration, closeFn runs at once and the error
// matches ErrClosed: the provider returns it instead of the object.
func (s *SRQ) OnContextClose(closeFn func() error) error {
	return s.pd.ctx.kids.setCloseBy(s.kid, "create_srq", closeFn)
}

// Modify changes what mask selects (IB_USER_VERBS_CMD_MODIFY_SRQ): SRQLimit
// arms the limit event, SRQMaxWR resizes the queue. driverIn is the
// driver's command (for rdma_rxe struct rxe_modify_srq_cmd: the user address
// the kernel writes the resized ring's mmap offset and size to).
func (s *SRQ) Modify(attr SRQAttr, mask SRQAttrMask, driverIn []byte) error {
	const verb = "modify_srq"
	if mask&^(SRQMaxWR|SRQLimit) != 0 {
		return fmt.Errorf("uverbs: %s: mask %#x: %w", verb, uint32(mask), ErrNotSupported)
	}
	if !s.gate.enter() {
		return closedError(verb)
	}
	defer s.gate.leave()
	var f writeFrame[modifySRQCmd]
	f.req = modifySRQCmd{SRQHandle: s.handle, AttrMask: uint32(mask), MaxWR: attr.MaxWR, SRQLimit: attr.Limit}
	return execWrite(s.pd.ctx, verb, cmdModifySRQ, &f, noResp, driverIn, 0)
}

// Query returns the SRQ's current attributes (IB_USER_VERBS_CMD_QUERY_SRQ).
// rdma_rxe reports as MaxWR the capacity of the ring, and as Limit 0 once
// the limit event has fired.
func (s *SRQ) Query() (SRQAttr, error) {
	const verb = "query_srq"
	if !s.gate.enter() {
		return SRQAttr{}, closedError(verb)
	}
	defer s.gate.leave()
	var resp respFrame[querySRQResp]
	var f writeFrame[querySRQCmd]
	f.req = querySRQCmd{Response: resp.ptr(), SRQHandle: s.handle}
	if err := execWrite(s.pd.ctx, verb, cmdQuerySRQ, &f, &resp, nil, 0); err != nil {
		return SRQAttr{}, err
	}
	return SRQAttr{MaxWR: resp.resp.MaxWR, MaxSGE: resp.resp.MaxSGE, Limit: resp.resp.SRQLimit}, nil
}

// Close destroys the SRQ (UVERBS_METHOD_SRQ_DESTROY, or
// IB_USER_VERBS_CMD_DESTROY_SRQ on a kernel without it). The kernel refuses
// (EBUSY) while QPs use it; a failed destroy may be retried, and once it
// has succeeded Close does nothing.
func (s *SRQ) Close() error {
	return s.gate.shut(func() error {
		c := s.pd.ctx
		if !c.released() {
			if _, err := s.destroy(); destroyed(c, err) != nil {
				return err
			}
		}
		s.watch.Closed()
		c.events.removeSRQ(s.userHandle, s)
		c.kids.remove(s.kid)
		return nil
	})
}

// destroy sends UVERBS_METHOD_SRQ_DESTROY, as libibverbs 44 does, and the
// write() command only when the kernel lacks the method.
func (s *SRQ) destroy() (destroySRQResp, error) {
	const verb = "destroy_srq"
	c := s.pd.ctx
	var r destroySRQResp
	if done, err := c.tryIoctl(ioctlDestroySRQ, verb, func(driverID uint32) *ioctlBuf {
		b := newIoctl(objectSRQ, methodSRQDestroy, driverID)
		b.objIn(attrDestroySRQHandle, s.handle)
		b.ptrOut(attrDestroySRQResp, unsafe.Pointer(&r), int(unsafe.Sizeof(r)))
		return b
	}); done {
		return r, err
	}
	var resp respFrame[destroySRQResp]
	var f writeFrame[destroySRQCmd]
	f.req = destroySRQCmd{Response: resp.ptr(), SRQHandle: s.handle}
	err := execWrite(c, verb, cmdDestroySRQ, &f, &resp, nil, 0)
	return resp.resp, err
}
