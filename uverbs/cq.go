package uverbs

import (
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// CQSpec describes a completion queue to create.
type CQSpec struct {
	CQE        int          // minimum number of entries; the device may round up
	Channel    *CompChannel // completion channel for events, or nil
	Vector     int          // completion vector, < Context.NumCompVectors
	UserHandle uint64       // returned by CompChannel.ReadEvent and async events for this CQ; 0: the Context picks one
	// Owner is what the Context's async events about the object report as
	// AsyncEvent.Object: the application-level object that wraps it
	// (package cq's *CQ, package qp's *QP or *SRQ). nil reports this
	// package's object itself.
	Owner any
}

// CQ is the kernel side of a completion queue. Polling it is the provider's
// business (the rxe ring), through the driver data CreateCQ returns.
type CQ struct {
	ctx        *Context
	handle     uint32
	cqe        atomic.Int64 // changed by Resize
	userHandle uint64
	channel    *CompChannel
	owner      any // reported by async events; nil: the CQ itself
	kid        *child
	gate       gate
	watch      leakcheck.Watch
}

// CreateCQ creates a completion queue (UVERBS_METHOD_CQ_CREATE, or
// IB_USER_VERBS_CMD_CREATE_CQ on a kernel without it). driverOut receives
// the driver's response (for rdma_rxe a struct rxe_create_cq_resp with the
// ring's mmap offset and size); its length is what the driver expects, a
// multiple of 4 bytes.
func (c *Context) CreateCQ(attr CQSpec, driverOut []byte) (*CQ, error) {
	const verb = "create_cq"
	if attr.CQE <= 0 || attr.CQE > math.MaxInt32 || attr.Vector < 0 || attr.Vector > math.MaxInt32 {
		return nil, fmt.Errorf("uverbs: %s: cqe %d, vector %d: %w", verb, attr.CQE, attr.Vector, unix.EINVAL)
	}
	if err := checkDriverData(verb, nil, len(driverOut), 4); err != nil {
		return nil, err
	}
	attr.UserHandle = c.events.handle(attr.UserHandle)
	if ch := attr.Channel; ch != nil {
		if !ch.gate.enter() {
			return nil, closedError(verb)
		}
		defer ch.gate.leave()
	}
	r, err := c.createCQ(attr, driverOut)
	if err != nil {
		return nil, err
	}
	cq := &CQ{ctx: c, handle: r.CQHandle, userHandle: attr.UserHandle, channel: attr.Channel, owner: attr.Owner}
	cq.cqe.Store(int64(r.CQE))
	cq.kid = addChild(&c.kids, levelCQMR, cq, (*CQ).Close)
	cq.watch = watchKernelObject(cq, "CQ", cq.handle)
	c.events.addCQ(cq.userHandle, cq)
	return cq, nil
}

// createCQ sends the ioctl, as libibverbs 44 does, and the write() command
// only when the kernel lacks the method.
func (c *Context) createCQ(attr CQSpec, driverOut []byte) (createCQResp, error) {
	const verb = "create_cq"
	var (
		cqe    uint32
		handle *ioctlAttr
	)
	if done, err := c.tryIoctl(ioctlCreateCQ, verb, func(driverID uint32) *ioctlBuf {
		var b *ioctlBuf
		b, handle = createCQIoctl(driverID, attr, c.asyncFD.int(), &cqe, driverOut)
		return b
	}); done {
		if err != nil {
			return createCQResp{}, err
		}
		return createCQResp{CQHandle: uint32(handle.Data), CQE: cqe}, nil
	}
	var resp respFrame[createCQResp]
	var f writeFrame[createCQCmd]
	f.req = createCQCmd{
		Response:    resp.ptr(),
		UserHandle:  attr.UserHandle,
		CQE:         uint32(attr.CQE),
		CompVector:  uint32(attr.Vector),
		CompChannel: -1,
	}
	if attr.Channel != nil {
		f.req.CompChannel = int32(attr.Channel.fd.int())
	}
	if err := execWrite(c, verb, cmdCreateCQ, &f, &resp, nil, len(driverOut)); err != nil {
		return createCQResp{}, err
	}
	copy(driverOut, resp.drv[:])
	return resp.resp, nil
}

// createCQIoctl builds UVERBS_METHOD_CQ_CREATE as ibv_icmd_create_cq in
// libibverbs 44 does, with librxe's driver response as UVERBS_ATTR_UHW_OUT
// (the last attribute, as libibverbs appends the driver's buffer): the new
// handle (returned, for the kernel's answer in its Data), the granted CQE
// count, the CQE count asked, the user handle, the completion channel if
// any, the vector, and the async event fd, optional so that kernels before
// it existed accept the command. All others are mandatory.
func createCQIoctl(driverID uint32, attr CQSpec, asyncFD int, cqe *uint32, driverOut []byte) (*ioctlBuf, *ioctlAttr) {
	b := newIoctl(objectCQ, methodCQCreate, driverID)
	handle := b.objIn(attrCreateCQHandle, 0)
	b.ptrOut(attrCreateCQRespCQE, unsafe.Pointer(cqe), int(unsafe.Sizeof(*cqe)))
	b.u32In(attrCreateCQCQE, uint32(attr.CQE))
	b.u64In(attrCreateCQUserHandle, attr.UserHandle)
	if attr.Channel != nil {
		b.fdIn(attrCreateCQCompChannel, attr.Channel.fd.int())
	}
	b.u32In(attrCreateCQCompVector, uint32(attr.Vector))
	if asyncFD >= 0 {
		b.fdIn(attrCreateCQEventFD, asyncFD).Flags &^= attrFMandatory
	}
	if len(driverOut) > 0 {
		b.ptrOut(attrUHWOut, unsafe.Pointer(&driverOut[0]), len(driverOut))
	}
	return b, handle
}

// Context returns the context of the CQ.
func (cq *CQ) Context() *Context { return cq.ctx }

// Handle returns the kernel handle of the CQ.
func (cq *CQ) Handle() uint32 { return cq.handle }

// CQE returns the number of entries the device granted.
func (cq *CQ) CQE() int { return int(cq.cqe.Load()) }

// UserHandle returns the handle given at creation.
func (cq *CQ) UserHandle() uint64 { return cq.userHandle }

// Channel returns the completion channel of the CQ, or nil.
func (cq *CQ) Channel() *CompChannel { return cq.channel }

// OnContextClose registers the provider's Close of the CQ (which closes
// this one and unmaps the ring the provider mapped) for the Context's
// Close to call. It should refer to the provider's object weakly, or the
// Context keeps it alive. If the Context's Close passed the
// object before the registration, closeFn runs at once and the error
// matches ErrClosed: the provider returns it instead of the object.
func (cq *CQ) OnContextClose(closeFn func() error) error {
	return cq.ctx.kids.setCloseBy(cq.kid, "create_cq", closeFn)
}

// ReqNotify arms the CQ (IB_USER_VERBS_CMD_REQ_NOTIFY_CQ): the next
// completion (only solicited ones if solicitedOnly) raises one event on the
// channel. A completion that arrived before arming raises none: poll again
// after arming. It allocates nothing.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if !cq.gate.enter() {
		return errReqNotifyClosed
	}
	var f hotFrame[reqNotifyCQCmd]
	f.req = reqNotifyCQCmd{CQHandle: cq.handle}
	if solicitedOnly {
		f.req.SolicitedOnly = 1
	}
	// No defer on this path: see PostSendDoorbell.
	errno := hotWrite(cq.ctx, unsafe.Pointer(&f), unsafe.Sizeof(f), 0, cmdReqNotifyCQ)
	cq.gate.leave()
	if errno != 0 {
		return cmdError("req_notify_cq", errno)
	}
	return nil
}

// errReqNotifyClosed is ReqNotify's ErrClosed, preallocated.
var errReqNotifyClosed = closedError("req_notify_cq")

// Close destroys the CQ (UVERBS_METHOD_CQ_DESTROY, or
// IB_USER_VERBS_CMD_DESTROY_CQ on a kernel without it). A failed destroy
// leaves the CQ as it was and may be retried; once it has succeeded, Close
// does nothing.
func (cq *CQ) Close() error {
	return cq.gate.shut(func() error {
		if !cq.ctx.released() {
			if _, err := cq.destroy(); destroyed(cq.ctx, err) != nil {
				return err
			}
		}
		cq.watch.Closed()
		cq.ctx.events.removeCQ(cq.userHandle, cq)
		cq.ctx.kids.remove(cq.kid)
		return nil
	})
}

// destroy sends the ioctl, as libibverbs 44 does, and the write() command
// only when the kernel lacks the method.
func (cq *CQ) destroy() (destroyCQResp, error) {
	const verb = "destroy_cq"
	c := cq.ctx
	var r destroyCQResp
	if done, err := c.tryIoctl(ioctlDestroyCQ, verb, func(driverID uint32) *ioctlBuf {
		return destroyCQIoctl(driverID, cq.handle, &r)
	}); done {
		return r, err
	}
	var resp respFrame[destroyCQResp]
	var f writeFrame[destroyCQCmd]
	f.req = destroyCQCmd{Response: resp.ptr(), CQHandle: cq.handle}
	err := execWrite(c, verb, cmdDestroyCQ, &f, &resp, nil, 0)
	return resp.resp, err
}

// destroyCQIoctl builds UVERBS_METHOD_CQ_DESTROY as ibv_cmd_destroy_cq
// does: the response, then the handle with destroy access; both mandatory.
func destroyCQIoctl(driverID, handle uint32, r *destroyCQResp) *ioctlBuf {
	b := newIoctl(objectCQ, methodCQDestroy, driverID)
	b.ptrOut(attrDestroyCQResp, unsafe.Pointer(r), int(unsafe.Sizeof(*r)))
	b.objIn(attrDestroyCQHandle, handle)
	return b
}

// Resize asks the kernel to change the CQ to hold at least cqe entries
// (IB_USER_VERBS_CMD_RESIZE_CQ) and returns the number it granted.
// driverOut receives the driver's response (for rdma_rxe a struct
// rxe_resize_cq_resp: the new ring's mmap offset and size; the kernel has
// copied the pending completions into it). rdma_rxe refuses (EINVAL) a size
// below the number of completions pending. The provider must not poll
// while the command runs.
func (cq *CQ) Resize(cqe int, driverOut []byte) (int, error) {
	const verb = "resize_cq"
	if cqe <= 0 || cqe > math.MaxInt32 {
		return 0, fmt.Errorf("uverbs: %s: cqe %d: %w", verb, cqe, unix.EINVAL)
	}
	if !cq.gate.enter() {
		return 0, closedError(verb)
	}
	defer cq.gate.leave()
	if err := checkDriverData(verb, nil, len(driverOut), 8); err != nil {
		return 0, err
	}
	var resp respFrame[resizeCQResp]
	var f writeFrame[resizeCQCmd]
	f.req = resizeCQCmd{Response: resp.ptr(), CQHandle: cq.handle, CQE: uint32(cqe)}
	if err := execWrite(cq.ctx, verb, cmdResizeCQ, &f, &resp, nil, len(driverOut)); err != nil {
		return 0, err
	}
	copy(driverOut, resp.drv[:])
	cq.cqe.Store(int64(resp.resp.CQE))
	return int(resp.resp.CQE), nil
}
