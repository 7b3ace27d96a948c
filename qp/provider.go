package qp

import "github.com/pureverbs/pureverbs/rxe"

// The boundary with the rxe provider. Package rxe cannot import qp (qp
// imports it), so it has work requests of its own; PostSend and PostRecv
// hand each request over with rxe.QP.PostSendFunc/PostRecvFunc, which call
// back for one request at a time into a request the queue owns: a field
// copy, on the stack of neither side, so posting stays allocation-free.
// The opcode, flag and flush values are the kernel's and equal on both
// sides (TestProviderValues).

// fill writes w as the provider's request into r, every field: r may hold
// an earlier request. Field by field, not as one composite literal, which
// the compiler builds in a temporary and then copies (r might alias w).
func (w *SendWR) fill(r *rxe.SendWR) {
	r.ID = w.ID
	r.Opcode = rxe.Opcode(w.Opcode)
	r.Flags = rxe.SendFlags(w.Flags)
	r.Imm = w.Imm
	r.SGEs = w.SGEs
	r.Inline = w.Inline
	r.RemoteAddr = w.RemoteAddr
	r.RKey = w.RKey
	r.CompareAdd = w.CompareAdd
	r.Swap = w.Swap
	r.InvRKey = w.InvRKey
	r.Bind = rxe.MWBind(w.Bind)
	r.Flush = rxe.FlushSpec{
		Length: w.Flush.Length,
		Type:   rxe.FlushType(w.Flush.Type),
		Level:  rxe.FlushLevel(w.Flush.Level),
	}
	r.AH = nil
	if w.AH != nil {
		r.AH = w.AH.core
	}
	r.RemoteQPN = w.RemoteQPN
	r.RemoteQKey = w.RemoteQKey
}

// String is the opcode's IBV_WR_ name without "IBV_", e.g. "WR_SEND".
func (o SendOpcode) String() string { return rxe.Opcode(o).String() }
