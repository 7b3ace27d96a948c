//go:build integration

package integration

import (
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Every completion field rxe fills on RC, on both sides: opcode, byte_len
// (the message length on the receiver and on the sender), immediate data
// with its flag, the QP number. Measured on rxe: RC receive completions
// carry the GRH flag (RoCE packets always have a GRH/IP header), src_qp 0
// (set only from a DETH, i.e. UD), SL 0 and port 1; send completions carry
// port 0 and, for SEND_WITH_IMM, the WITH_IMM flag with imm_data 0.
func TestWCFieldsRC(t *testing.T) {
	a, b := pair(t, false, endOpts{bufSize: 1 << 14})
	const imm = 0x12345678
	for i := range 3 {
		if err := b.qp.PostRecv([]qp.RecvWR{{ID: uint64(100 + i), SGEs: []uverbs.SGE{sge(b, 0, 2048)}}}); err != nil {
			t.Fatal(err)
		}
	}
	wrs := []qp.SendWR{
		{ID: 1, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 0, 300)}},
		{ID: 2, Opcode: qp.SendWithImm, Flags: qp.Signaled, Imm: imm, SGEs: []uverbs.SGE{sge(a, 0, 1500)}},
		{ID: 3, Opcode: qp.RDMAWriteWithImm, Flags: qp.Signaled, Imm: imm + 1, SGEs: []uverbs.SGE{sge(a, 0, 700)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey()},
		{ID: 4, Opcode: qp.RDMAWrite, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 0, 64)}, RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey()},
		{ID: 5, Opcode: qp.RDMARead, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 8192, 500)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
	}
	if err := a.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	sent := pollWait(t, a.cq, make([]cq.WC, 5), 5, 10*time.Second)
	recv := pollWait(t, b.cq, make([]cq.WC, 3), 3, 10*time.Second)
	wantSend := []struct {
		op    cq.Opcode
		len   uint32
		flags cq.WCFlags
	}{{cq.OpSend, 300, 0}, {cq.OpSend, 1500, cq.WithImm}, {cq.OpRDMAWrite, 700, cq.WithImm}, {cq.OpRDMAWrite, 64, 0}, {cq.OpRDMARead, 500, 0}}
	for i, w := range sent {
		t.Logf("sender  %d: %+v", i, w)
		if w.Status != cq.Success || w.WRID != uint64(i+1) || w.Opcode != wantSend[i].op || w.QPNum != a.qp.Num() || w.Flags != wantSend[i].flags || w.Imm != 0 {
			t.Errorf("send completion %d: %+v, want %v", i, w, wantSend[i].op)
		}
		if w.ByteLen != wantSend[i].len {
			t.Errorf("send completion %d: byte_len %d, want %d", i, w.ByteLen, wantSend[i].len)
		}
	}
	wantRecv := []struct {
		op    cq.Opcode
		len   uint32
		flags cq.WCFlags
		imm   uint32
	}{{cq.OpRecv, 300, cq.GRH, 0}, {cq.OpRecv, 1500, cq.GRH | cq.WithImm, imm}, {cq.OpRecvRDMAWithImm, 700, cq.GRH | cq.WithImm, imm + 1}}
	for i, w := range recv {
		t.Logf("receiver %d: %+v", i, w)
		want := wantRecv[i]
		if w.Status != cq.Success || w.WRID != uint64(100+i) || w.Opcode != want.op || w.ByteLen != want.len ||
			w.Flags != want.flags || w.Imm != want.imm || w.QPNum != b.qp.Num() {
			t.Errorf("receive completion %d: %+v, want %+v", i, w, want)
		}
		if w.SrcQP != 0 || w.SL != 0 || w.PortNum != 1 || w.PKeyIndex != 0 {
			t.Errorf("receive completion %d: src_qp %d, sl %d, port %d, pkey index %d", i, w.SrcQP, w.SL, w.PortNum, w.PKeyIndex)
		}
	}
}
