package uverbs

// PD is a protection domain.
type PD struct {
	ctx    *Context
	handle uint32
	close  once
}

// AllocPD allocates a protection domain (IB_USER_VERBS_CMD_ALLOC_PD).
func (c *Context) AllocPD() (*PD, error) {
	var resp respFrame[allocPDResp]
	var f writeFrame[allocPDCmd]
	f.req = allocPDCmd{Response: resp.ptr()}
	if err := execWrite(c.fd, "alloc_pd", cmdAllocPD, &f, &resp, nil, 0); err != nil {
		return nil, err
	}
	return &PD{ctx: c, handle: resp.resp.PDHandle}, nil
}

// Context returns the context the PD belongs to.
func (pd *PD) Context() *Context { return pd.ctx }

// Handle returns the kernel handle of the PD.
func (pd *PD) Handle() uint32 { return pd.handle }

// Close deallocates the PD (IB_USER_VERBS_CMD_DEALLOC_PD). The kernel
// refuses with EBUSY while MRs or QPs still use it; Close can then be
// retried. Once it has succeeded, Close does nothing.
func (pd *PD) Close() error {
	return pd.close.do(func() error {
		if pd.ctx.released() {
			return nil
		}
		var f writeFrame[deallocPDCmd]
		f.req = deallocPDCmd{PDHandle: pd.handle}
		return execWrite(pd.ctx.fd, "dealloc_pd", cmdDeallocPD, &f, noResp, nil, 0)
	})
}
