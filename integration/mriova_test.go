//go:build integration

package integration

import (
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// A region registered under an I/O virtual address of its own
// (ibv_reg_mr_iova) is addressed from that address: a peer's RDMA WRITE and
// READ at iova+64 reach the buffer's byte 64, and a receive SGE at iova+128
// lands at byte 128, whatever the buffer's real address.
func TestUverbsRegisterMRIOVA(t *testing.T) {
	buf, err := uverbs.NewBuffer(8192, uverbs.BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	t.Run("own address", func(t *testing.T) { iovaRoundTrip(t, buf, buf.Addr()+4096) })
	t.Run("other page", func(t *testing.T) { iovaRoundTrip(t, buf, buf.Addr()+4096+1<<20) })
	t.Run("high", func(t *testing.T) { iovaRoundTrip(t, buf, 0x5a5a_0000_1000) })
}

func iovaRoundTrip(t *testing.T, buf *uverbs.Buffer, iova uint64) {
	a, b := pair(t, false, endOpts{bufSize: 1 << 16})
	mr, err := b.pd.RegisterMRIOVA(buf, 4096, 4096, iova,
		uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { closeOK(t, "iova MR", mr.Close()) }()
	if mr.Addr() != iova {
		t.Fatalf("MR address %#x, want the iova %#x", mr.Addr(), iova)
	}
	region := buf.Bytes()[4096:]

	recvSGE, err := mr.SGE(128, 20)
	if err != nil {
		t.Fatal(err)
	}
	if recvSGE.Addr != iova+128 {
		t.Fatalf("SGE address %#x, want %#x", recvSGE.Addr, iova+128)
	}
	if err := b.qp.PostRecv([]qp.RecvWR{{ID: 9, SGEs: []uverbs.SGE{recvSGE}}}); err != nil {
		t.Fatal(err)
	}
	copy(a.buf.Bytes(), "written-through-iova|sent-into-iova-mr")
	err = a.qp.PostSend([]qp.SendWR{
		{ID: 1, Opcode: qp.RDMAWrite, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 0, 20)}, RemoteAddr: iova + 64, RKey: mr.RKey()},
		{ID: 2, Opcode: qp.RDMARead, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 2000, 20)}, RemoteAddr: iova + 64, RKey: mr.RKey()},
		{ID: 3, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 21, 17)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wc := make([]cq.WC, 4)
	for i, w := range pollWait(t, a.cq, wc, 3, 10*time.Second) {
		if w.Status != cq.Success || w.WRID != uint64(i+1) {
			t.Fatalf("completion %d: %+v", i, w)
		}
	}
	if got := string(region[64:84]); got != "written-through-iova" {
		t.Errorf("RDMA WRITE at iova+64 left %q at byte 64", got)
	}
	if got := string(a.buf.Bytes()[2000:2020]); got != "written-through-iova" {
		t.Errorf("RDMA READ at iova+64 read %q", got)
	}
	r := pollWait(t, b.cq, wc, 1, 10*time.Second)[0]
	if r.Status != cq.Success || r.WRID != 9 || r.ByteLen != 17 {
		t.Fatalf("receive %+v", r)
	}
	if got := string(region[128:145]); got != "sent-into-iova-mr" {
		t.Errorf("receive at iova+128 left %q at byte 128", got)
	}
	if iova == buf.Addr()+4096 {
		return
	}
	// The buffer's own address is not the region's: a WRITE there is
	// outside the region and fails on the sender.
	err = a.qp.PostSend([]qp.SendWR{{ID: 4, Opcode: qp.RDMAWrite, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 0, 8)},
		RemoteAddr: buf.Addr() + 4096, RKey: mr.RKey()}})
	if err != nil {
		t.Fatal(err)
	}
	if w := pollWait(t, a.cq, wc, 1, 10*time.Second)[0]; w.Status == cq.Success {
		t.Errorf("RDMA WRITE at the buffer's real address through an iova region succeeded")
	} else {
		t.Logf("WRITE at the real address: %v", w.Status)
	}
}
