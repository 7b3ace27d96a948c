package uverbs

// PD is a protection domain.
type PD struct {
	ctx    *Context
	handle uint32
	kid    *child
	close  once
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
	pd.kid = c.kids.add(levelPD, pd.Close)
	return pd, nil
}

// Context returns the context the PD belongs to.
func (pd *PD) Context() *Context { return pd.ctx }

// Handle returns the kernel handle of the PD.
func (pd *PD) Handle() uint32 { return pd.handle }

// Close deallocates the PD (UVERBS_METHOD_PD_DESTROY, or
// IB_USER_VERBS_CMD_DEALLOC_PD on a kernel without it). The kernel refuses
// with EBUSY while MRs or QPs still use it; Close can then be retried. Once
// it has succeeded, Close does nothing.
func (pd *PD) Close() error {
	return pd.close.do(func() error {
		if !pd.ctx.released() {
			if err := pd.dealloc(); err != nil {
				return err
			}
		}
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
