package rxe

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/rxe/internal/ring"
)

// The offsets below are the C layout of struct rxe_send_wqe / rxe_recv_wqe
// (gcc, /usr/include/rdma/rdma_user_rxe.h), written out independently of the
// Go structs so that a field stored in the wrong place shows up here.

func ne32(b []byte, off int) uint32 { return binary.NativeEndian.Uint32(b[off:]) }
func ne64(b []byte, off int) uint64 { return binary.NativeEndian.Uint64(b[off:]) }

// dirtySlot is a send slot full of 0xff, as a slot the kernel already used
// might be.
func dirtySlot(t *testing.T, r *ring.Ring) []byte {
	t.Helper()
	s := r.Slot(0)
	for i := range s {
		s[i] = 0xff
	}
	return s
}

func TestEncodeSendBytes(t *testing.T) {
	r := mustRing(t, 256, 1)
	s := dirtySlot(t, r)
	wr := SendWR{
		ID:         0x1122334455667788,
		Opcode:     OpRDMAWriteWithImm,
		Flags:      Signaled | Solicited,
		Imm:        0xdeadbeef,
		SGEs:       []SGE{{Addr: 0x1000, Length: 10, LKey: 0x11}, {Addr: 0x2000, Length: 20, LKey: 0x22}},
		RemoteAddr: 0xaabbccdd00,
		RKey:       0x4321,
	}
	encodeSend(r.At(0), &wr, 30, 7)
	for _, c := range []struct {
		what      string
		got, want uint64
	}{
		{"wr.wr_id", ne64(s, 0), wr.ID},
		{"wr.opcode", uint64(ne32(s, 12)), 1},
		{"wr.send_flags", uint64(ne32(s, 16)), 6},
		{"wr.rdma.remote_addr", ne64(s, 24), wr.RemoteAddr},
		{"wr.rdma.rkey", uint64(ne32(s, 32)), 0x4321},
		{"wr.ud.pad (cleared)", ne64(s, 40), 0},
		{"status (cleared)", uint64(ne32(s, 144)), 0},
		{"state = wqe_state_posted", uint64(ne32(s, 148)), 0},
		{"iova", ne64(s, 152), wr.RemoteAddr},
		{"mask (kernel sets it)", uint64(ne32(s, 160)), 0},
		{"first_psn (cleared)", uint64(ne32(s, 164)), 0},
		{"ssn", uint64(ne32(s, 176)), 7},
		{"has_rd_atomic (cleared)", uint64(ne32(s, 180)), 0},
		{"dma.length", uint64(ne32(s, 184)), 30},
		{"dma.resid", uint64(ne32(s, 188)), 30},
		{"dma.cur_sge", uint64(ne32(s, 192)), 0},
		{"dma.num_sge", uint64(ne32(s, 196)), 2},
		{"dma.sge_offset", uint64(ne32(s, 200)), 0},
		{"sge[0].addr", ne64(s, 208), 0x1000},
		{"sge[0].length", uint64(ne32(s, 216)), 10},
		{"sge[0].lkey", uint64(ne32(s, 220)), 0x11},
		{"sge[1].addr", ne64(s, 224), 0x2000},
		{"sge[1].length", uint64(ne32(s, 232)), 20},
		{"sge[1].lkey", uint64(ne32(s, 236)), 0x22},
		{"past the SGEs (untouched)", ne64(s, 240), ^uint64(0)},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.what, c.got, c.want)
		}
	}
	if !bytes.Equal(s[20:24], []byte{0xde, 0xad, 0xbe, 0xef}) {
		t.Errorf("ex.imm_data = % x, want network order de ad be ef", s[20:24])
	}
}

func TestEncodeSendInlineBytes(t *testing.T) {
	r := mustRing(t, 256, 1)
	s := dirtySlot(t, r)
	wr := SendWR{ID: 9, Opcode: OpSend, Flags: Inline, Inline: []byte("hello")}
	encodeSend(r.At(0), &wr, 5, 0)
	if got := ne32(s, 16); got != uint32(Inline) {
		t.Errorf("send_flags = %#x, want IB_SEND_INLINE", got)
	}
	if got := ne32(s, 20); got != 0 {
		t.Errorf("imm_data = %#x for a SEND, want 0", got)
	}
	if ne32(s, 184) != 5 || ne32(s, 188) != 5 || ne32(s, 196) != 0 {
		t.Errorf("dma length/resid/num_sge = %d/%d/%d, want 5/5/0", ne32(s, 184), ne32(s, 188), ne32(s, 196))
	}
	if string(s[208:213]) != "hello" || s[213] != 0xff {
		t.Errorf("inline_data = %q", s[208:214])
	}
}

func TestEncodeRecvBytes(t *testing.T) {
	r := mustRing(t, 128, 1)
	s := dirtySlot(t, r)
	wr := RecvWR{ID: 0xabc, SGEs: []SGE{{Addr: 0x5000, Length: 4096, LKey: 7}, {Addr: 0x9000, Length: 1, LKey: 8}}}
	encodeRecv(r.At(0), &wr, 4097)
	for _, c := range []struct {
		what      string
		got, want uint64
	}{
		{"wr_id", ne64(s, 0), 0xabc},
		{"reserved (cleared)", ne64(s, 8), 0},
		{"dma.length", uint64(ne32(s, 16)), 4097},
		{"dma.resid", uint64(ne32(s, 20)), 4097},
		{"dma.cur_sge", uint64(ne32(s, 24)), 0},
		{"dma.num_sge", uint64(ne32(s, 28)), 2},
		{"dma.sge_offset", uint64(ne32(s, 32)), 0},
		{"sge[0].addr", ne64(s, 40), 0x5000},
		{"sge[0].length", uint64(ne32(s, 48)), 4096},
		{"sge[0].lkey", uint64(ne32(s, 52)), 7},
		{"sge[1].addr", ne64(s, 56), 0x9000},
		{"past the SGEs (untouched)", ne64(s, 72), ^uint64(0)},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.what, c.got, c.want)
		}
	}
}

func TestSendWQERoundTrip(t *testing.T) {
	r := mustRing(t, 512, 1)
	for _, wr := range []SendWR{
		{ID: 1, Opcode: OpSend, Flags: Signaled, SGEs: []SGE{{Addr: 1, Length: 2, LKey: 3}}},
		{ID: 2, Opcode: OpSendWithImm, Imm: 0x01020304, SGEs: []SGE{{Addr: 4, Length: 5, LKey: 6}, {Addr: 7, Length: 8, LKey: 9}}},
		{ID: 3, Opcode: OpRDMAWrite, Flags: Fence, SGEs: []SGE{{Addr: 1, Length: 1, LKey: 1}}, RemoteAddr: 77, RKey: 5},
		{ID: 4, Opcode: OpRDMARead, SGEs: []SGE{{Addr: 1, Length: 64, LKey: 1}}, RemoteAddr: 1 << 40, RKey: 6},
		{ID: 5, Opcode: OpSendWithImm, Flags: Inline | Signaled, Imm: 42, Inline: bytes.Repeat([]byte{0x5a}, 300)},
		{ID: 6, Opcode: OpSend, SGEs: []SGE{}},
	} {
		n := uint32(len(wr.Inline))
		if wr.Flags&Inline == 0 {
			n, _ = sgeTotal(wr.SGEs)
		}
		encodeSend(r.At(0), &wr, n, uint32(wr.ID)*10)
		got, err := decodeSendWQE(r.Slot(0))
		if err != nil {
			t.Fatal(err)
		}
		want := sendWQEView{WR: wr, SSN: uint32(wr.ID) * 10, Length: n, Resid: n}
		if wr.Opcode.isRDMA() {
			want.IOVA = wr.RemoteAddr
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b []SGE) bool { return cmp.Equal(append([]SGE{}, a...), append([]SGE{}, b...)) })); diff != "" {
			t.Errorf("WR %d round trip (-want +got):\n%s", wr.ID, diff)
		}
	}
}

func TestDecodeRejectsOverrun(t *testing.T) {
	r := mustRing(t, 256, 1)
	wr := SendWR{Opcode: OpSend, SGEs: make([]SGE, 3)} // 208 + 48 = 256: fits
	encodeSend(r.At(0), &wr, 0, 0)
	if _, err := decodeSendWQE(r.Slot(0)); err != nil {
		t.Fatalf("3 SGEs in a 256-byte slot: %v", err)
	}
	binary.NativeEndian.PutUint32(r.Slot(0)[196:], 4)
	if _, err := decodeSendWQE(r.Slot(0)); err == nil {
		t.Fatal("4 SGEs in a 256-byte slot decoded")
	}
	binary.NativeEndian.PutUint32(r.Slot(0)[28:], 3) // recv dma.num_sge
	if _, err := decodeRecvWQE(r.Slot(0)[:64]); err == nil {
		t.Fatal("3 receive SGEs in a 64-byte slot decoded")
	}
}

func TestWCRoundTrip(t *testing.T) {
	r := mustRing(t, 64, 1)
	for _, w := range []WC{
		{WRID: 1, Status: WCSuccess, Opcode: WCRecv, ByteLen: 100, Imm: 0xcafebabe, Flags: WCWithImm, QPNum: 17, SrcQP: 18, PKeyIndex: 1, SLID: 2, SL: 3, DLIDPathBits: 4, PortNum: 1},
		{WRID: 2, Status: WCLocProtErr, Opcode: WCSend, VendorErr: 0x99},
		{WRID: 3, Opcode: WCRecv, Imm: 0x1234, Flags: WCWithInvalidate},
	} {
		encodeWC(r.Slot(0), &w)
		var got WC
		decodeWC(r.At(0), &got)
		if got != w {
			t.Errorf("round trip: got %+v, want %+v", got, w)
		}
	}
	// Golden bytes for the fields whose byte order matters.
	encodeWC(r.Slot(0), &WC{WRID: 5, Status: WCWRFlushErr, Opcode: WCRecvRDMAWithImm, Imm: 0x01020304, Flags: WCWithImm, QPNum: 0x11})
	s := r.Slot(0)
	if ne64(s, 0) != 5 || ne32(s, 8) != 5 || ne32(s, 12) != 129 || ne32(s, 28) != 0x11 || ne32(s, 36) != 2 {
		t.Errorf("ib_uverbs_wc bytes % x", s[:48])
	}
	if !bytes.Equal(s[24:28], []byte{1, 2, 3, 4}) {
		t.Errorf("imm_data bytes % x, want network order", s[24:28])
	}
}

func TestStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{WCSuccess.String(), "SUCCESS"},
		{WCWRFlushErr.String(), "WR_FLUSH_ERR"},
		{WCGeneralErr.String(), "GENERAL_ERR"},
		{WCStatus(99).String(), "WCStatus(99)"},
		{WCRecvRDMAWithImm.String(), "WC_RECV_RDMA_WITH_IMM"},
		{WCSend.String(), "WC_SEND"},
		{WCOpcode(77).String(), "WCOpcode(77)"},
		{OpSendWithImm.String(), "WR_SEND_WITH_IMM"},
		{OpSend.String(), "WR_SEND"},
		{Opcode(12).String(), "Opcode(12)"},
	} {
		if c.got != c.want {
			t.Errorf("String() = %q, want %q", c.got, c.want)
		}
	}
	if !WCRecv.IsRecv() || !WCRecvRDMAWithImm.IsRecv() || WCSend.IsRecv() {
		t.Error("IsRecv wrong")
	}
}
