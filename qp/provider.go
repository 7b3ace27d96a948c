package qp

import "github.com/pureverbs/pureverbs/rxe"

// The boundary with the rxe provider. Package rxe cannot import qp (qp
// imports it), so it has work requests of its own; PostSend and PostRecv
// hand each request over with rxe.QP.PostSendFunc/PostRecvFunc, which call
// back for one request at a time into a request the queue owns: a field
// copy, on the stack of neither side, so posting stays allocation-free.
// The opcode, flag and flush values are the kernel's and equal on both
// sides (TestProviderValues).

// fill writes w as the provider's request into r.
func (w *SendWR) fill(r *rxe.SendWR) {
	*r = rxe.SendWR{
		ID:         w.ID,
		Opcode:     rxe.Opcode(w.Opcode),
		Flags:      rxe.SendFlags(w.Flags),
		Imm:        w.Imm,
		SGEs:       w.SGEs,
		Inline:     w.Inline,
		RemoteAddr: w.RemoteAddr,
		RKey:       w.RKey,
		CompareAdd: w.CompareAdd,
		Swap:       w.Swap,
		InvRKey:    w.InvRKey,
		Bind:       rxe.MWBind(w.Bind),
		Flush: rxe.FlushSpec{
			Length: w.Flush.Length,
			Type:   rxe.FlushType(w.Flush.Type),
			Level:  rxe.FlushLevel(w.Flush.Level),
		},
		RemoteQPN:  w.RemoteQPN,
		RemoteQKey: w.RemoteQKey,
	}
	if w.AH != nil {
		r.AH = w.AH.core
	}
}

// String is the opcode's IBV_WR_ name without "IBV_", e.g. "WR_SEND".
func (o SendOpcode) String() string { return rxe.Opcode(o).String() }
