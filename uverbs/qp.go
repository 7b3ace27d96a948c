package uverbs

import (
	"fmt"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// QPSpec describes a queue pair to create.
type QPSpec struct {
	Type       QPType
	SendCQ     *CQ
	RecvCQ     *CQ
	Cap        QPCap
	SigAll     bool   // every send WR generates a completion
	UserHandle uint64 // reported with async events of the QP; 0: the Context picks one
	// SRQ, if set, is the shared receive queue the QP takes its receive
	// requests from; the QP then has no receive queue of its own and the
	// receive caps are ignored.
	SRQ *SRQ
	// Owner is what the Context's async events about the object report as
	// AsyncEvent.Object: the application-level object that wraps it
	// (package cq's *CQ, package qp's *QP or *SRQ). nil reports this
	// package's object itself.
	Owner any
}

// QP is the kernel side of a queue pair. Posting work is the provider's
// business (the rxe rings), except the send doorbell.
type QP struct {
	pd     *PD
	handle uint32
	num    uint32
	init   QPSpec      // Cap as granted
	groups mcastGroups // multicast groups attached, detached before destroy
	kid    *child
	gate   gate
	watch  leakcheck.Watch
}

// CreateQP creates a queue pair (UVERBS_METHOD_QP_CREATE, or
// IB_USER_VERBS_CMD_CREATE_QP on a kernel without it). driverOut receives
// the driver's response (for rdma_rxe a struct rxe_create_qp_resp with the
// mmap offsets and sizes of both rings).
func (pd *PD) CreateQP(attr QPSpec, driverOut []byte) (*QP, error) {
	const verb = "create_qp"
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, fmt.Errorf("uverbs: %s: send and receive CQ are required: %w", verb, unix.EINVAL)
	}
	if err := checkDriverData(verb, nil, len(driverOut), 4); err != nil {
		return nil, err
	}
	for _, g := range [...]*gate{&pd.gate, &attr.SendCQ.gate, &attr.RecvCQ.gate, srqGate(attr.SRQ)} {
		if g == nil {
			continue
		}
		if !g.enter() {
			return nil, closedError(verb)
		}
		defer g.leave()
	}
	c := pd.ctx
	attr.UserHandle = c.events.handle(attr.UserHandle)
	if attr.SRQ != nil {
		attr.Cap.MaxRecvWR, attr.Cap.MaxRecvSGE = 0, 0
	}
	var (
		cp     = attr.Cap // asked for; the kernel writes the granted caps back
		qpn    uint32
		handle *ioctlAttr
	)
	qp := &QP{pd: pd, init: attr}
	if done, err := c.tryIoctl(ioctlCreateQP, verb, func(driverID uint32) *ioctlBuf {
		var b *ioctlBuf
		b, handle = createQPIoctl(driverID, pd.handle, attr, c.asyncFD.int(), &cp, &qpn, driverOut)
		return b
	}); done {
		if err != nil {
			return nil, err
		}
		qp.handle, qp.num, qp.init.Cap = uint32(handle.Data), qpn, cp
	} else {
		var resp respFrame[createQPResp]
		var f writeFrame[createQPCmd]
		f.req = createQPCmd{
			Response:      resp.ptr(),
			UserHandle:    attr.UserHandle,
			PDHandle:      pd.handle,
			SendCQHandle:  attr.SendCQ.handle,
			RecvCQHandle:  attr.RecvCQ.handle,
			MaxSendWR:     attr.Cap.MaxSendWR,
			MaxRecvWR:     attr.Cap.MaxRecvWR,
			MaxSendSGE:    attr.Cap.MaxSendSGE,
			MaxRecvSGE:    attr.Cap.MaxRecvSGE,
			MaxInlineData: attr.Cap.MaxInlineData,
			SQSigAll:      b2u8(attr.SigAll),
			QPType:        uint8(attr.Type),
		}
		if attr.SRQ != nil {
			f.req.SRQHandle, f.req.IsSRQ = attr.SRQ.handle, 1
		}
		if err := execWrite(c, verb, cmdCreateQP, &f, &resp, nil, len(driverOut)); err != nil {
			return nil, err
		}
		copy(driverOut, resp.drv[:])
		r := &resp.resp
		qp.handle, qp.num = r.QPHandle, r.QPN
		qp.init.Cap = QPCap{r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInlineData}
	}
	qp.kid = addChild(&pd.ctx.kids, levelQP, qp, (*QP).Close)
	qp.watch = watchKernelObject(qp, "QP", qp.handle)
	c.events.addQP(attr.UserHandle, qp)
	return qp, nil
}

// createQPIoctl builds UVERBS_METHOD_QP_CREATE as ibv_icmd_create_qp in
// libibverbs 44 does for an RC/UC/UD QP: the PD, send CQ and receive CQ
// handles, the new QP's handle (returned, for the kernel's
// answer in its Data), the type, the user handle, the caps asked (cp, in),
// the async event fd (left out when there is none), the flags only when
// SigAll sets one, the SRQ handle when there is an SRQ, the caps granted (cp again, out) and the QP number; then
// librxe's driver response as UVERBS_ATTR_UHW_OUT, last. Every attribute is
// mandatory.
func createQPIoctl(driverID, pdHandle uint32, attr QPSpec, asyncFD int, cp *QPCap, qpn *uint32, driverOut []byte) (*ioctlBuf, *ioctlAttr) {
	b := newIoctl(objectQP, methodQPCreate, driverID)
	b.objIn(attrCreateQPPDHandle, pdHandle)
	b.objIn(attrCreateQPSendCQ, attr.SendCQ.handle)
	b.objIn(attrCreateQPRecvCQ, attr.RecvCQ.handle)
	handle := b.objIn(attrCreateQPHandle, 0)
	b.constIn(attrCreateQPType, uint64(attr.Type))
	b.u64In(attrCreateQPUserHandle, attr.UserHandle)
	b.ptrIn(attrCreateQPCap, unsafe.Pointer(cp), int(unsafe.Sizeof(*cp)))
	if asyncFD >= 0 {
		b.fdIn(attrCreateQPEventFD, asyncFD)
	}
	if attr.SigAll {
		b.u32In(attrCreateQPFlags, createQPSQSigAll)
	}
	if attr.SRQ != nil {
		b.objIn(attrCreateQPSRQHandle, attr.SRQ.handle)
	}
	b.ptrOut(attrCreateQPRespCap, unsafe.Pointer(cp), int(unsafe.Sizeof(*cp)))
	b.ptrOut(attrCreateQPRespQPNum, unsafe.Pointer(qpn), int(unsafe.Sizeof(*qpn)))
	if len(driverOut) > 0 {
		b.ptrOut(attrUHWOut, unsafe.Pointer(&driverOut[0]), len(driverOut))
	}
	return b, handle
}

// srqGate is s's gate, nil for no SRQ.
func srqGate(s *SRQ) *gate {
	if s == nil {
		return nil
	}
	return &s.gate
}

// OnContextClose registers the provider's Close of the QP for the
// Context's Close to call: it closes this QP while holding the provider's
// send lock, so that no doorbell can follow, and unmaps the provider's
// rings. It should refer to the provider's object weakly, or the Context
// keeps it alive. If the Context's Close passed the
// object before the registration, closeFn runs at once and the error
// matches ErrClosed: the provider returns it instead of the object.
func (qp *QP) OnContextClose(closeFn func() error) error {
	return qp.pd.ctx.kids.setCloseBy(qp.kid, "create_qp", closeFn)
}

// PD returns the protection domain of the QP.
func (qp *QP) PD() *PD { return qp.pd }

// Num returns the QP number peers address.
func (qp *QP) Num() uint32 { return qp.num }

// Handle returns the kernel handle of the QP.
func (qp *QP) Handle() uint32 { return qp.handle }

// Cap returns the capacity the device granted (at least what was asked).
func (qp *QP) Cap() QPCap { return qp.init.Cap }

// Spec returns the creation attributes, with Cap as granted.
func (qp *QP) Spec() QPSpec { return qp.init }

// Modify changes the attributes mask selects (IB_USER_VERBS_CMD_MODIFY_QP),
// e.g. the RESET→INIT→RTR→RTS transitions. For RoCE the address vector needs
// AH.IsGlobal with DGID, SGIDIndex and HopLimit.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	if mask&^qpAttrAll != 0 {
		return fmt.Errorf("uverbs: modify_qp: mask %#x: %w", uint32(mask), ErrNotSupported)
	}
	if !qp.gate.enter() {
		return closedError("modify_qp")
	}
	defer qp.gate.leave()
	var f writeFrame[modifyQPCmd]
	f.req = modifyQPFrom(qp.handle, attr, mask)
	return execWrite(qp.pd.ctx, "modify_qp", cmdModifyQP, &f, noResp, nil, 0)
}

// Query returns the QP's current attributes (IB_USER_VERBS_CMD_QUERY_QP);
// mask says which the caller wants, though the kernel fills in all it knows.
func (qp *QP) Query(mask QPAttrMask) (QPAttr, QPSpec, error) {
	if !qp.gate.enter() {
		return QPAttr{}, QPSpec{}, closedError("query_qp")
	}
	defer qp.gate.leave()
	var resp respFrame[queryQPResp]
	var f writeFrame[queryQPCmd]
	f.req = queryQPCmd{Response: resp.ptr(), QPHandle: qp.handle, AttrMask: uint32(mask)}
	if err := execWrite(qp.pd.ctx, "query_qp", cmdQueryQP, &f, &resp, nil, 0); err != nil {
		return QPAttr{}, QPSpec{}, err
	}
	attr := qpAttrFrom(&resp.resp)
	init := qp.init
	init.Cap = attr.Cap
	init.SigAll = resp.resp.SQSigAll != 0
	return attr, init, nil
}

// PostSendDoorbell tells the kernel that new WQEs are in the send ring: a
// POST_SEND command with no work requests, as librxe sends it. It allocates
// nothing.
func (qp *QP) PostSendDoorbell() error {
	if !qp.gate.enter() {
		return errDoorbellClosed
	}
	var resp postSendResp
	var f hotFrame[postSendCmd]
	f.req = postSendCmd{Response: ptr64{unsafe.Pointer(&resp)}, QPHandle: qp.handle, WQESize: doorbellWQESize}
	// No defer: hotWrite runs no caller code, and a deferred call is 14
	// instructions of a doorbell's 300 outside the kernel.
	errno := hotWrite(qp.pd.ctx, unsafe.Pointer(&f), unsafe.Sizeof(f), uint16(unsafe.Sizeof(resp)/4), cmdPostSend)
	qp.gate.leave()
	if errno != 0 {
		return cmdError("post_send", errno)
	}
	return nil
}

// errDoorbellClosed is PostSendDoorbell's ErrClosed, preallocated.
var errDoorbellClosed = closedError("post_send")

// Close detaches the QP from the multicast groups it is still attached to
// (the kernel refuses to destroy it otherwise) and destroys it
// (UVERBS_METHOD_QP_DESTROY, or IB_USER_VERBS_CMD_DESTROY_QP on a kernel
// without it). A failed destroy may be retried; once it has succeeded,
// Close does nothing.
func (qp *QP) Close() error {
	return qp.gate.shut(func() error {
		if !qp.pd.ctx.released() {
			if _, err := qp.destroy(); destroyed(qp.pd.ctx, err) != nil {
				return err
			}
		}
		qp.watch.Closed()
		qp.pd.ctx.events.removeQP(qp.init.UserHandle, qp)
		qp.pd.ctx.kids.remove(qp.kid)
		return nil
	})
}

// destroy sends the ioctl, as libibverbs 44 does, and the write() command
// only when the kernel lacks the method.
func (qp *QP) destroy() (destroyQPResp, error) {
	const verb = "destroy_qp"
	c := qp.pd.ctx
	var r destroyQPResp
	if err := qp.detachAll(); err != nil {
		return r, err
	}
	if done, err := c.tryIoctl(ioctlDestroyQP, verb, func(driverID uint32) *ioctlBuf {
		return destroyQPIoctl(driverID, qp.handle, &r)
	}); done {
		return r, err
	}
	var resp respFrame[destroyQPResp]
	var f writeFrame[destroyQPCmd]
	f.req = destroyQPCmd{Response: resp.ptr(), QPHandle: qp.handle}
	err := execWrite(c, verb, cmdDestroyQP, &f, &resp, nil, 0)
	return resp.resp, err
}

// destroyQPIoctl builds UVERBS_METHOD_QP_DESTROY as ibv_cmd_destroy_qp
// does: the response, then the handle with destroy access; both mandatory.
func destroyQPIoctl(driverID, handle uint32, r *destroyQPResp) *ioctlBuf {
	b := newIoctl(objectQP, methodQPDestroy, driverID)
	b.ptrOut(attrDestroyQPResp, unsafe.Pointer(r), int(unsafe.Sizeof(*r)))
	b.objIn(attrDestroyQPHandle, handle)
	return b
}
