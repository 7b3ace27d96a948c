package uverbs

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// QPInitAttr describes a queue pair to create.
type QPInitAttr struct {
	Type       QPType
	SendCQ     *CQ
	RecvCQ     *CQ
	Cap        QPCap
	SigAll     bool   // every send WR generates a completion
	UserHandle uint64 // reported with async events of the QP
}

// QP is the kernel side of a queue pair. Posting work is the provider's
// business (the rxe rings), except the send doorbell.
type QP struct {
	pd     *PD
	handle uint32
	num    uint32
	init   QPInitAttr // Cap as granted
	kid    *child
	close  once
}

// CreateQP creates a queue pair (IB_USER_VERBS_CMD_CREATE_QP). driverOut
// receives the driver's response (for rdma_rxe a struct rxe_create_qp_resp
// with the mmap offsets and sizes of both rings).
func (pd *PD) CreateQP(attr QPInitAttr, driverOut []byte) (*QP, error) {
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, fmt.Errorf("uverbs: create_qp: send and receive CQ are required: %w", unix.EINVAL)
	}
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
	if err := execWrite(pd.ctx, "create_qp", cmdCreateQP, &f, &resp, nil, len(driverOut)); err != nil {
		return nil, err
	}
	copy(driverOut, resp.drv[:])
	r := &resp.resp
	qp := &QP{pd: pd, handle: r.QPHandle, num: r.QPN, init: attr}
	qp.init.Cap = QPCap{r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInlineData}
	qp.kid = pd.ctx.kids.add(levelQP, func() error { _, err := qp.Destroy(); return err })
	return qp, nil
}

// OnContextClose registers release to run when the Context's Close destroys
// the QP (not when Destroy does): the provider detaches and unmaps the rings
// it mapped for the QP there.
func (qp *QP) OnContextClose(release func()) { qp.pd.ctx.kids.setRelease(qp.kid, release) }

// PD returns the protection domain of the QP.
func (qp *QP) PD() *PD { return qp.pd }

// Num returns the QP number peers address.
func (qp *QP) Num() uint32 { return qp.num }

// Handle returns the kernel handle of the QP.
func (qp *QP) Handle() uint32 { return qp.handle }

// Cap returns the capacity the device granted (at least what was asked).
func (qp *QP) Cap() QPCap { return qp.init.Cap }

// InitAttr returns the creation attributes, with Cap as granted.
func (qp *QP) InitAttr() QPInitAttr { return qp.init }

// Modify changes the attributes mask selects (IB_USER_VERBS_CMD_MODIFY_QP),
// e.g. the RESET→INIT→RTR→RTS transitions. For RoCE the address vector needs
// AH.IsGlobal with DGID, SGIDIndex and HopLimit.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	if mask&^qpAttrAll != 0 {
		return fmt.Errorf("uverbs: modify_qp: mask %#x: %w", uint32(mask), ErrNotSupported)
	}
	var f writeFrame[modifyQPCmd]
	f.req = modifyQPFrom(qp.handle, attr, mask)
	return execWrite(qp.pd.ctx, "modify_qp", cmdModifyQP, &f, noResp, nil, 0)
}

// Query returns the QP's current attributes (IB_USER_VERBS_CMD_QUERY_QP);
// mask says which the caller wants, though the kernel fills in all it knows.
func (qp *QP) Query(mask QPAttrMask) (QPAttr, QPInitAttr, error) {
	var resp respFrame[queryQPResp]
	var f writeFrame[queryQPCmd]
	f.req = queryQPCmd{Response: resp.ptr(), QPHandle: qp.handle, AttrMask: uint32(mask)}
	if err := execWrite(qp.pd.ctx, "query_qp", cmdQueryQP, &f, &resp, nil, 0); err != nil {
		return QPAttr{}, QPInitAttr{}, err
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
	var resp respFrame[postSendResp]
	var f writeFrame[postSendCmd]
	f.req = postSendCmd{Response: resp.ptr(), QPHandle: qp.handle, WQESize: doorbellWQESize}
	return execHotWrite(qp.pd.ctx, "post_send", cmdPostSend, &f, &resp)
}

// Destroy destroys the QP (UVERBS_METHOD_QP_DESTROY, or
// IB_USER_VERBS_CMD_DESTROY_QP on a kernel without it) and returns how many
// async events the kernel reported for it. Idempotent: later calls return 0.
func (qp *QP) Destroy() (events uint32, err error) {
	err = qp.close.do(func() error {
		if !qp.pd.ctx.released() {
			r, err := qp.destroy()
			if err != nil {
				return err
			}
			events = r.EventsReported
		}
		qp.pd.ctx.kids.remove(qp.kid)
		return nil
	})
	return events, err
}

// destroy sends the ioctl, as libibverbs 44 does, and the write() command
// only when the kernel lacks the method.
func (qp *QP) destroy() (destroyQPResp, error) {
	const verb = "destroy_qp"
	c := qp.pd.ctx
	var r destroyQPResp
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
