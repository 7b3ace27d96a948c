package rxe

import (
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// A UD WQE carries the destination QPN, Q_Key and AH number at the offsets
// of struct rxe_send_wqe's wr.ud (24, 28, 36), an empty av (the kernel
// looks the AH up by number), and the SEND_WITH_IMM immediate in network
// order at 20; the remote-address fields of the rdma member, which overlay
// them, are not written.
func TestEncodeUDBytes(t *testing.T) {
	sq, _, db := testQueues(t, 3, 3, testLimits)
	sq.typ, sq.maxUD = uverbs.QPTypeUD, 1024
	s := dirtySlot(t, sq.ring)
	ah := &AH{num: 0x2a}
	wr := SendWR{ID: 9, Opcode: OpSendWithImm, Flags: Signaled, Imm: 0x01020304, AH: ah, RemoteQPN: 0x123456, RemoteQKey: 0x11111111,
		SGEs: []SGE{{Addr: 0x1000, Length: 1024, LKey: 7}}}
	if err := sq.post([]SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	if db.n.Load() != 1 {
		t.Fatal("no doorbell")
	}
	for _, c := range []struct {
		what      string
		got, want uint64
	}{
		{"wr.opcode", uint64(ne32(s, 12)), 3},
		{"wr.ex.imm_data (big endian)", uint64(ne32(s, 20)), uint64(0x04030201)},
		{"wr.ud.remote_qpn", uint64(ne32(s, 24)), 0x123456},
		{"wr.ud.remote_qkey", uint64(ne32(s, 28)), 0x11111111},
		{"wr.ud.pkey_index", uint64(ne32(s, 32)), 0},
		{"wr.ud.ah_num", uint64(ne32(s, 36)), 0x2a},
		{"wr.ud.av.port_num.. (cleared)", ne64(s, 56), 0},
		{"wr.ud.av.grh.dgid (cleared)", ne64(s, 64), 0},
		{"iova (no remote address)", ne64(s, 152), 0},
		{"dma.length", uint64(ne32(s, 184)), 1024},
		{"sge[0].addr", ne64(s, 208), 0x1000},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.what, c.got, c.want)
		}
	}
}

// A UD payload longer than the MTU, an opcode UD does not have and a UD
// request without an AH are refused before anything is posted.
func TestUDRefusals(t *testing.T) {
	sq, _, db := testQueues(t, 3, 3, testLimits)
	sq.typ, sq.maxUD = uverbs.QPTypeUD, 1024
	ah := &AH{num: 1}
	ok := SendWR{Opcode: OpSend, AH: ah, SGEs: []SGE{{Length: 1024}}}
	for name, c := range map[string]struct {
		wr   SendWR
		want error
	}{
		"MTU+1 bytes":  {SendWR{Opcode: OpSend, AH: ah, SGEs: []SGE{{Length: 1000}, {Length: 25}}}, ErrMessageTooLong},
		"RDMA WRITE":   {SendWR{Opcode: OpRDMAWrite, AH: ah}, ErrOpcodeTransport},
		"RDMA READ":    {SendWR{Opcode: OpRDMARead, AH: ah}, ErrOpcodeTransport},
		"no AH":        {SendWR{Opcode: OpSend}, ErrOpcodeTransport},
		"inline MTU+1": {SendWR{Opcode: OpSend, AH: ah, Flags: Inline, Inline: make([]byte, 1025)}, ErrInlineTooLong},
	} {
		if err := sq.post([]SendWR{ok, c.wr}); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
	if err := sq.post([]SendWR{{Opcode: OpSend, AH: ah, SGEs: []SGE{{Length: 2000}}}}); !errors.Is(err, unix.EMSGSIZE) {
		t.Errorf("too long: err = %v, want EMSGSIZE", err)
	}
	if db.n.Load() != 0 || sq.prod != 0 {
		t.Fatalf("refused requests posted: %d doorbells, producer %d", db.n.Load(), sq.prod)
	}
	if err := sq.post([]SendWR{ok}); err != nil {
		t.Fatal(err)
	}
}

// UC carries SEND, SEND_WITH_IMM, RDMA WRITE and WRITE_WITH_IMM; RDMA READ
// and anything else (SEND_WITH_INV is opcode 9) are refused, as is an AH
// on a connected QP.
func TestUCOpcodes(t *testing.T) {
	sq, _, db := testQueues(t, 7, 3, testLimits)
	sq.typ = uverbs.QPTypeUC
	for _, op := range []Opcode{OpSend, OpSendWithImm, OpRDMAWrite, OpRDMAWriteWithImm} {
		if err := sq.post([]SendWR{{Opcode: op}}); err != nil {
			t.Errorf("UC %v: %v", op, err)
		}
	}
	for _, op := range []Opcode{OpRDMARead, 9} {
		if err := sq.post([]SendWR{{Opcode: op}}); !errors.Is(err, ErrOpcodeTransport) {
			t.Errorf("UC %v: err = %v, want ErrOpcodeTransport", op, err)
		}
	}
	if err := sq.post([]SendWR{{Opcode: OpSend, AH: &AH{num: 1}}}); !errors.Is(err, ErrOpcodeTransport) {
		t.Errorf("UC with an AH: err = %v", err)
	}
	if db.n.Load() != 4 {
		t.Fatalf("%d doorbells, want 4", db.n.Load())
	}
}

func TestUDPostAllocatesNothing(t *testing.T) {
	sq, _, _ := testQueues(t, 3, 3, testLimits)
	sq.typ, sq.maxUD = uverbs.QPTypeUD, 1024
	wrs := []SendWR{{Opcode: OpSend, AH: &AH{num: 1}, RemoteQPN: 5, SGEs: []SGE{{Length: 8}}}}
	if n := testing.AllocsPerRun(100, func() {
		if err := sq.post(wrs); err != nil {
			t.Fatal(err)
		}
		sq.ring.SetConsumer(sq.prod) // the kernel took it
	}); n != 0 {
		t.Fatalf("%v allocations per UD post", n)
	}
}
