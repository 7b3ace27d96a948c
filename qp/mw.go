package qp

import (
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// MWBindParams describe a binding for QP.BindMW and BindWR: Length bytes at
// offset Off of MR, with Access granted to peers through the window.
type MWBindParams struct {
	MR     *uverbs.MR // needs uverbs.AccessMWBind, in the window's PD
	Off    int
	Length int // 0 unbinds a type 1 window
	Access uverbs.Access
}

// BindWR builds the BIND_MW work request that binds mw as p says, asking
// for the window's next rkey (uverbs.NextRKey). Post it with PostSend (type
// 2 windows) and, once it completed successfully, record the new rkey with
// mw.SetRKey(wr.Bind.NewRKey). The range must lie inside the region. A
// window closed before BindWR is refused with ErrClosed; the request
// carries only key numbers, so closing the window between BindWR and
// PostSend is the caller's to avoid.
func BindWR(id uint64, flags SendFlags, mw *uverbs.MW, p MWBindParams) (SendWR, error) {
	if mw.Closed() {
		return SendWR{}, fmt.Errorf("qp: bind_mw: %w", ErrClosed)
	}
	if p.MR == nil || p.Off < 0 || p.Length < 0 || p.Off > p.MR.Len() || p.Length > p.MR.Len()-p.Off {
		return SendWR{}, fmt.Errorf("qp: bind_mw: range outside the memory region: %w", unix.EINVAL)
	}
	if p.Access&uverbs.AccessZeroBased != 0 {
		return SendWR{}, fmt.Errorf("qp: bind_mw: zero-based windows: %w", ErrNotSupported)
	}
	return SendWR{
		ID:     id,
		Opcode: BindMW,
		Flags:  flags,
		Bind: MWBind{
			MWRKey:  mw.RKey(),
			NewRKey: uverbs.NextRKey(mw.RKey()),
			MRLKey:  p.MR.LKey(),
			Addr:    p.MR.Addr() + uint64(p.Off),
			Length:  uint64(p.Length),
			Access:  p.Access,
		},
	}, nil
}

// BindMW binds a type 1 window (ibv_bind_mw). As librxe does, it posts a
// BIND_MW work request on q with id and flags (add Signaled to see its
// completion, opcode cq.OpBindMW) and, once posted, records the window's
// new rkey in mw and returns it. Should the completion report an error,
// the window keeps its old rkey: set it back with mw.SetRKey.
func (q *QP) BindMW(mw *uverbs.MW, id uint64, flags SendFlags, p MWBindParams) (uint32, error) {
	if mw.Type() != uverbs.MWType1 {
		return 0, fmt.Errorf("qp: bind_mw: %v window: bind it with a BindMW work request: %w", mw.Type(), unix.EINVAL)
	}
	wr, err := BindWR(id, flags, mw, p)
	if err != nil {
		return 0, err
	}
	if err := q.PostSend([]SendWR{wr}); err != nil {
		return 0, err
	}
	mw.SetRKey(wr.Bind.NewRKey)
	return wr.Bind.NewRKey, nil
}
