package uverbs

import (
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
)

// PD is a protection domain.
type PD struct {
	ctx    *Context
	handle uint32
	kid    *child
	gate   gate
	watch  leakcheck.Watch
}

// AllocPD allocates a protection domain (IB_USER_VERBS_CMD_ALLOC_PD).
func (c *Context) AllocPD() (*PD, error) {
	var resp respFrame[allocPDResp]
	var f writeFrame[allocPDCmd]
	f.req = allocPDCmd{Response: resp.ptr()}
	if err := execWrite(c, "alloc_pd", cmdAllocPD, &f, &resp, nil, 0); err != nil {
		return nil, err
	}
	pd := &PD{ctx: c, handle: resp.resp.PDHandle}
	pd.kid = addChild(&c.kids, levelPD, pd, (*PD).Close)
	pd.watch = watchKernelObject(pd, "PD", pd.handle)
	return pd, nil
}

// watchKernelObject has the leak check report obj, a kernel object of kind
// what, if it is dropped unclosed. Its collection releases nothing: the
// kernel object lives until its Context closes.
func watchKernelObject[T any](obj *T, what string, handle uint32) leakcheck.Watch {
	return leakcheck.Object(obj, fmt.Sprintf("uverbs.%s handle %d", what, handle), nil, struct{}{})
}

// Context returns the context the PD belongs to.
func (pd *PD) Context() *Context { return pd.ctx }

// Handle returns the kernel handle of the PD.
func (pd *PD) Handle() uint32 { return pd.handle }

// Close deallocates the PD (UVERBS_METHOD_PD_DESTROY, or
// IB_USER_VERBS_CMD_DEALLOC_PD on a kernel without it). The kernel refuses
// with EBUSY while MRs or QPs still use it; Close can then be retried. Once
// it has succeeded, Close does nothing, and the PD's methods return
// ErrClosed.
func (pd *PD) Close() error {
	return pd.gate.shut(func() error {
		if !pd.ctx.released() {
			if err := destroyed(pd.ctx, pd.dealloc()); err != nil {
				return err
			}
		}
		pd.watch.Closed()
		pd.ctx.kids.remove(pd.kid)
		return nil
	})
}

// dealloc sends the ioctl, as libibverbs 44 does, and the write() command
// only when the kernel lacks the method.
func (pd *PD) dealloc() error {
	const verb = "dealloc_pd"
	c := pd.ctx
	if done, err := c.tryIoctl(ioctlDeallocPD, verb, func(driverID uint32) *ioctlBuf {
		return deallocPDIoctl(driverID, pd.handle)
	}); done {
		return err
	}
	var f writeFrame[deallocPDCmd]
	f.req = deallocPDCmd{PDHandle: pd.handle}
	return execWrite(c, verb, cmdDeallocPD, &f, noResp, nil, 0)
}

// deallocPDIoctl builds UVERBS_METHOD_PD_DESTROY as ibv_cmd_dealloc_pd
// does: only the handle, with destroy access.
func deallocPDIoctl(driverID, handle uint32) *ioctlBuf {
	b := newIoctl(objectPD, methodPDDestroy, driverID)
	b.objIn(attrDestroyPDHandle, handle)
	return b
}
