package rxesim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/rxe"
)

// The simulator reads WQEs at its own offsets and package rxe writes them
// through its raw structs (whose offsets rxe's tests pin to the header); the
// two agreeing on every field is the check that neither drifted.

func TestReadSendAgreesWithRxe(t *testing.T) {
	p := newPair(t, false)
	sges := []rxe.SGE{{Addr: p.addrA, Length: 10, LKey: p.keyA}, {Addr: p.addrA + 64, Length: 22, LKey: p.keyA}}
	wrs := []rxe.SendWR{
		{ID: 0x0102030405060708, Opcode: rxe.OpRDMAWriteWithImm, Flags: rxe.Signaled | rxe.Fence, Imm: 0xa1b2c3d4,
			SGEs: sges, RemoteAddr: 0x1122334455667788, RKey: 0x99aabbcc},
		{ID: 2, Opcode: rxe.OpSend, Flags: rxe.Inline | rxe.Solicited, Inline: []byte("inline bytes")},
	}
	p.a.peer = nil // keep the WQEs in the ring: nothing executes them
	if err := p.a.User.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	got0, ok0 := readSend(p.a.sq.Slot(0))
	got1, ok1 := readSend(p.a.sq.Slot(1))
	if !ok0 || !ok1 {
		t.Fatalf("readSend ok = %v, %v", ok0, ok1)
	}
	want0 := sendWQE{id: wrs[0].ID, opcode: rxe.OpRDMAWriteWithImm, flags: wrs[0].Flags, imm: wrs[0].Imm,
		remoteAddr: wrs[0].RemoteAddr, rkey: wrs[0].RKey, length: 32, sges: sges}
	want1 := sendWQE{id: 2, opcode: rxe.OpSend, flags: wrs[1].Flags, length: 12, inline: []byte("inline bytes")}
	opt := cmp.AllowUnexported(sendWQE{})
	if d := cmp.Diff(want0, got0, opt); d != "" {
		t.Errorf("RDMA write WQE (-want +got):\n%s", d)
	}
	// An inline WQE's rdma union is whatever the slot held; compare the rest.
	got1.remoteAddr, got1.rkey = 0, 0
	if d := cmp.Diff(want1, got1, opt); d != "" {
		t.Errorf("inline send WQE (-want +got):\n%s", d)
	}
}

func TestReadRecvAgreesWithRxe(t *testing.T) {
	p := newPair(t, false)
	sges := []rxe.SGE{{Addr: p.addrB, Length: 7, LKey: p.keyB}, {Addr: p.addrB + 100, Length: 9, LKey: p.keyB}, {Addr: p.addrB + 200, Length: 1, LKey: p.keyB}}
	if err := p.b.User.PostRecv([]rxe.RecvWR{{ID: 77, SGEs: sges}}); err != nil {
		t.Fatal(err)
	}
	got, ok := readRecv(p.b.rq.Slot(0))
	if d := cmp.Diff(recvWQE{id: 77, length: 17, sges: sges}, got, cmp.AllowUnexported(recvWQE{})); !ok || d != "" {
		t.Errorf("ok %v, receive WQE (-want +got):\n%s", ok, d)
	}
	// A WQE claiming more SGEs than its slot holds is refused, not read past.
	slot := p.b.rq.Slot(1)
	copy(slot[recvDMANumSGE:], []byte{0xff, 0xff, 0, 0})
	if _, ok := readRecv(slot); ok {
		t.Error("readRecv accepted 65535 SGEs in one slot")
	}
}

func TestWriteWCAgreesWithRxe(t *testing.T) {
	for _, w := range []rxe.WC{
		{WRID: 1<<63 | 5, Status: rxe.WCRemAccessErr, Opcode: rxe.WCRDMAWrite, VendorErr: 0x77, ByteLen: 4096,
			QPNum: 0x11, SrcQP: 0x22, PKeyIndex: 3, SLID: 0x4455, SL: 6, DLIDPathBits: 7, PortNum: 1},
		{WRID: 2, Opcode: rxe.WCRecvRDMAWithImm, Imm: 0x01020304, Flags: rxe.WCWithImm | rxe.WCGRH},
		{WRID: 3, Opcode: rxe.WCRecv, Imm: 0xdeadbeef, Flags: rxe.WCWithInvalidate},
	} {
		checkWCRoundTrip(t, w)
	}
}

// checkWCRoundTrip writes w at the simulator's offsets and polls it back
// through rxe's decoder: every field must come back.
func checkWCRoundTrip(t *testing.T, w rxe.WC) {
	t.Helper()
	c, err := New().NewCQ(3)
	if err != nil {
		t.Fatal(err)
	}
	c.push(&w)
	got := make([]rxe.WC, 2)
	if n, err := c.User.Poll(got); err != nil || n != 1 {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	if d := cmp.Diff(w, got[0]); d != "" {
		t.Errorf("completion (-wrote +polled):\n%s", d)
	}
}
