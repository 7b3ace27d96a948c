package uverbs

import (
	"fmt"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// MWType is the type of a memory window (enum ib_mw_type).
type MWType uint8

// Memory window types.
const (
	// MWType1 windows are bound by the bind verb (qp.QP.BindMW) and stay
	// valid until rebound or deallocated; any QP of the PD may use them.
	MWType1 MWType = 1
	// MWType2 windows are bound by a BIND_MW work request to one QP, which
	// alone may be reached through them, and are invalidated by LOCAL_INV
	// or a peer's SEND_WITH_INV.
	MWType2 MWType = 2
)

// String is "type 1" or "type 2".
func (t MWType) String() string { return fmt.Sprintf("type %d", uint8(t)) }

// MW is a memory window: remote access to part of a memory region, under
// its own rkey, granted and revoked without re-registering the region. The
// region must have AccessMWBind.
type MW struct {
	pd     *PD
	handle uint32
	typ    MWType
	rkey   atomic.Uint32
	kid    *child
	gate   gate
	watch  leakcheck.Watch
}

// AllocMW allocates a memory window of type t (IB_USER_VERBS_CMD_ALLOC_MW,
// as ibv_alloc_mw). It covers nothing until it is bound.
func (pd *PD) AllocMW(t MWType) (*MW, error) {
	if t != MWType1 && t != MWType2 {
		return nil, fmt.Errorf("uverbs: alloc_mw: %v: %w", t, unix.EINVAL)
	}
	if !pd.gate.enter() {
		return nil, closedError("alloc_mw")
	}
	defer pd.gate.leave()
	var resp respFrame[allocMWResp]
	var f writeFrame[allocMWCmd]
	f.req = allocMWCmd{Response: resp.ptr(), PDHandle: pd.handle, MWType: uint8(t)}
	if err := execWrite(pd.ctx, "alloc_mw", cmdAllocMW, &f, &resp, nil, 0); err != nil {
		return nil, err
	}
	mw := &MW{pd: pd, handle: resp.resp.MWHandle, typ: t}
	mw.rkey.Store(resp.resp.RKey)
	mw.kid = addChild(&pd.ctx.kids, levelMW, mw, (*MW).Close)
	mw.watch = watchKernelObject(mw, "MW", mw.handle)
	return mw, nil
}

// Type returns the window's type.
func (mw *MW) Type() MWType { return mw.typ }

// Handle returns the kernel handle of the window.
func (mw *MW) Handle() uint32 { return mw.handle }

// PD returns the protection domain the window belongs to.
func (mw *MW) PD() *PD { return mw.pd }

// RKey returns the window's current rkey: the one from allocation, or the
// one the last bind recorded (qp.QP.BindMW records it for type 1; record a
// type 2 bind's with SetRKey). A bind or an invalidate names the window by
// this rkey.
func (mw *MW) RKey() uint32 { return mw.rkey.Load() }

// SetRKey records the rkey a successful BIND_MW work request gave the
// window (the NewRKey it asked for).
func (mw *MW) SetRKey(rkey uint32) { mw.rkey.Store(rkey) }

// NextRKey is rkey with its key (the low 8 bits) incremented, as
// ibv_inc_rkey: the rkey to ask for in the next bind, so that peers holding
// the old one lose access.
func NextRKey(rkey uint32) uint32 { return rkey&^0xff | (rkey+1)&0xff }

// Closed reports whether the window was closed (by Close or its
// Context's), for a provider to refuse binding it: the bind would name a
// window that is gone, or another one.
func (mw *MW) Closed() bool { return mw.gate.closed() }

// Close deallocates the window (IB_USER_VERBS_CMD_DEALLOC_MW). Idempotent;
// after the Context was closed it does nothing.
func (mw *MW) Close() error {
	return mw.gate.shut(func() error {
		if !mw.pd.ctx.released() {
			var f writeFrame[deallocMWCmd]
			f.req = deallocMWCmd{MWHandle: mw.handle}
			if err := destroyed(mw.pd.ctx, execWrite(mw.pd.ctx, "dealloc_mw", cmdDeallocMW, &f, noResp, nil, 0)); err != nil {
				return err
			}
		}
		mw.watch.Closed()
		mw.pd.ctx.kids.remove(mw.kid)
		return nil
	})
}
