//go:build integration

package integration

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// waitBytes waits until b holds want (an unreliable write completes at the
// sender as soon as it is sent).
func waitBytes(t *testing.T, b []byte, want []byte, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !bytes.Equal(b, want) {
		if time.Now().After(deadline) {
			t.Fatalf("memory holds %q, want %q", b[:min(len(b), 32)], want[:min(len(want), 32)])
		}
		time.Sleep(time.Millisecond)
	}
}

// Two UC QPs on rxe0 and rxe1, connected with Connect (which sends UC's
// attribute masks: no RDMA READ, RNR or retry attributes), carry SEND,
// SEND_WITH_IMM, RDMA WRITE and RDMA WRITE_WITH_IMM, 4096-byte messages
// over a 1024-byte path MTU; RDMA READ and SEND_WITH_INV are refused before
// posting.
func TestUCOpcodes(t *testing.T) {
	devs := devices(t, 2)
	a, b := openEnd(t, devs[0], endOpts{typ: qp.UC, bufSize: 64 << 10}), openEnd(t, devs[1], endOpts{typ: qp.UC, bufSize: 64 << 10})
	if err := b.qp.ToInit(qp.InitParams{Access: uverbs.AccessRemoteWrite}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := b.qp.PostRecv([]qp.RecvWR{{ID: uint64(10 + i), SGEs: []uverbs.SGE{sge(b, i*4096, 4096)}}}); err != nil {
			t.Fatal(err)
		}
	}
	const psnA, psnB = 0x10203, 0x40506
	o := func(e *qpEnd, p uint32) qp.ConnectOptions {
		return qp.ConnectOptions{SGID: e.sgid, PathMTU: uverbs.MTU1024, SendPSN: p, Access: uverbs.AccessRemoteWrite}
	}
	if err := a.qp.Connect(qp.Peer{QPN: b.qp.Num(), PSN: psnB, GID: b.gid}, o(a, psnA)); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Connect(qp.Peer{QPN: a.qp.Num(), PSN: psnA, GID: a.gid}, o(b, psnB)); err != nil {
		t.Fatal(err)
	}
	attr, err := a.qp.Query()
	if err != nil || attr.State != qp.StateRTS || attr.SQPSN != psnA || attr.DestQPNum != b.qp.Num() || attr.PathMTU != uverbs.MTU1024 {
		t.Fatalf("UC QP after Connect: %+v, %v", attr, err)
	}
	src := a.buf.Bytes()
	for i := range src {
		src[i] = byte(i*7 + i>>8)
	}
	send := func(wr qp.SendWR) {
		t.Helper()
		wr.Flags |= qp.Signaled
		if err := a.qp.PostSend([]qp.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		if s := pollWait(t, a.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]; s.Status != cq.Success || s.WRID != wr.ID {
			t.Fatalf("%v completion %+v", wr.Opcode, s)
		}
	}
	recv := func(wantID uint64, op cq.Opcode, n int, imm uint32, withImm bool) {
		t.Helper()
		w := pollWait(t, b.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]
		if w.Status != cq.Success || w.WRID != wantID || w.Opcode != op || int(w.ByteLen) != n || (w.Flags&cq.WithImm != 0) != withImm || w.Imm != imm {
			t.Fatalf("receive %+v, want wr_id %d %v %d bytes imm %#x", w, wantID, op, n, imm)
		}
	}
	dst := b.buf.Bytes()

	send(qp.SendWR{ID: 1, Opcode: qp.Send, SGEs: []uverbs.SGE{sge(a, 0, 4096)}})
	recv(10, cq.OpRecv, 4096, 0, false)
	if !bytes.Equal(dst[:4096], src[:4096]) {
		t.Fatal("SEND payload differs")
	}
	send(qp.SendWR{ID: 2, Opcode: qp.SendWithImm, Imm: 0xfeedf00d, SGEs: []uverbs.SGE{sge(a, 4096, 3000)}})
	recv(11, cq.OpRecv, 3000, 0xfeedf00d, true)
	if !bytes.Equal(dst[4096:7096], src[4096:7096]) {
		t.Fatal("SEND_WITH_IMM payload differs")
	}
	send(qp.SendWR{ID: 3, Opcode: qp.RDMAWrite, RemoteAddr: b.mr.Addr() + 32768, RKey: b.mr.RKey(), SGEs: []uverbs.SGE{sge(a, 8192, 4096)}})
	waitBytes(t, dst[32768:32768+4096], src[8192:8192+4096], 10*time.Second)
	quiet(t, b.cq, "an RDMA WRITE")
	send(qp.SendWR{ID: 4, Opcode: qp.RDMAWriteWithImm, Imm: 42, RemoteAddr: b.mr.Addr() + 40960, RKey: b.mr.RKey(), SGEs: []uverbs.SGE{sge(a, 12288, 2500)}})
	recv(12, cq.OpRecvRDMAWithImm, 2500, 42, true)
	if !bytes.Equal(dst[40960:40960+2500], src[12288:12288+2500]) {
		t.Fatal("WRITE_WITH_IMM payload differs")
	}
	// 9 is IB_UVERBS_WR_SEND_WITH_INV: RC only (librxe advertises it on UC
	// too, the kernel refuses it there).
	for _, op := range []qp.SendOpcode{qp.RDMARead, 9} {
		err := a.qp.PostSend([]qp.SendWR{{Opcode: op, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(), SGEs: []uverbs.SGE{sge(a, 0, 8)}}})
		if !errors.Is(err, qp.ErrOpcodeTransport) {
			t.Errorf("UC %v: %v, want ErrOpcodeTransport", op, err)
		}
	}
	quiet(t, a.cq, "refused requests")
}
