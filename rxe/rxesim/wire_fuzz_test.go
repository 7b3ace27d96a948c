package rxesim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/rxe"
)

// FuzzSendWQEAgreesWithRxe posts arbitrary send requests of the basic
// opcodes through rxe's encoder and reads each slot back at the
// simulator's own offsets: every request rxe accepts must read back as it
// was given (inline payloads included), and a refused one must leave the
// ring untouched.
func FuzzSendWQEAgreesWithRxe(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(1), uint32(7), uint64(0x1000), uint32(9), uint8(2), uint16(10), []byte("abc"))
	f.Add(uint64(1<<63), uint8(3), uint8(0x8), uint32(0xffffffff), uint64(0), uint32(0), uint8(0), uint16(0), []byte("inline payload"))
	f.Add(uint64(5), uint8(4), uint8(0x3), uint32(0), uint64(1<<40), uint32(1), uint8(4), uint16(4096), []byte{})
	f.Fuzz(func(t *testing.T, id uint64, op, flags uint8, imm uint32, raddr uint64, rkey uint32, nsge uint8, sgeLen uint16, inline []byte) {
		ops := []rxe.Opcode{rxe.OpRDMAWrite, rxe.OpRDMAWriteWithImm, rxe.OpSend, rxe.OpSendWithImm, rxe.OpRDMARead}
		p := newPair(t, false)
		p.a.peer = nil // keep the WQE in the ring: nothing executes it
		wr := rxe.SendWR{ID: id, Opcode: ops[int(op)%len(ops)], Flags: rxe.SendFlags(flags & 0xf), Imm: imm,
			RemoteAddr: raddr, RKey: rkey}
		if wr.Flags&rxe.Inline != 0 {
			wr.Inline = inline
		} else {
			for i := range int(nsge % 6) {
				wr.SGEs = append(wr.SGEs, rxe.SGE{Addr: p.addrA + uint64(i)*8, Length: uint32(sgeLen), LKey: p.keyA})
			}
		}
		before := append([]byte(nil), p.a.sq.Slot(0)...)
		if err := p.a.User.PostSend([]rxe.SendWR{wr}); err != nil {
			if d := cmp.Diff(before, p.a.sq.Slot(0)); d != "" || p.a.sq.Len() != 0 {
				t.Fatalf("refused request (%v) changed the ring", err)
			}
			return
		}
		got, ok := readSend(p.a.sq.Slot(0))
		if !ok {
			t.Fatalf("rxe wrote a WQE the simulator cannot read: %+v", wr)
		}
		want := sendWQE{id: wr.ID, opcode: wr.Opcode, flags: wr.Flags, remoteAddr: wr.RemoteAddr, rkey: wr.RKey, sges: wr.SGEs}
		if wr.Opcode == rxe.OpRDMAWriteWithImm || wr.Opcode == rxe.OpSendWithImm {
			want.imm = wr.Imm
		}
		if wr.Opcode == rxe.OpSend || wr.Opcode == rxe.OpSendWithImm {
			// A SEND's rdma union is not written; compare the rest.
			got.remoteAddr, got.rkey = 0, 0
			want.remoteAddr, want.rkey = 0, 0
		}
		for _, s := range wr.SGEs {
			want.length += s.Length
		}
		if wr.Flags&rxe.Inline != 0 {
			want.length, want.inline = uint32(len(wr.Inline)), wr.Inline
		}
		if d := cmp.Diff(want, got, cmp.AllowUnexported(sendWQE{}), cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })); d != "" {
			t.Errorf("WQE (-posted +read):\n%s", d)
		}
	})
}

// FuzzWCAgreesWithRxe writes arbitrary completions at the simulator's
// offsets and polls them through rxe's decoder: every field comes back.
func FuzzWCAgreesWithRxe(f *testing.F) {
	f.Add(uint64(1), uint32(0), uint32(128), uint32(0), uint32(64), uint32(0x01020304), uint32(0x11), uint32(0x22), uint32(2), uint16(0), uint16(0), uint8(0), uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, id uint64, status, opcode, vendor, byteLen, imm, qpn, srcQP, flags uint32, pkey, slid uint16, sl, bits, port uint8) {
		w := rxe.WC{WRID: id, Status: rxe.WCStatus(status), Opcode: rxe.WCOpcode(opcode), VendorErr: vendor, ByteLen: byteLen,
			Imm: imm, QPNum: qpn, SrcQP: srcQP, Flags: rxe.WCFlags(flags), PKeyIndex: pkey, SLID: slid, SL: sl, DLIDPathBits: bits, PortNum: port}
		checkWCRoundTrip(t, w)
	})
}
