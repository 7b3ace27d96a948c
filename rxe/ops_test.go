package rxe

import (
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// offsetCase is one expected field of an encoded slot.
type offsetCase struct {
	what      string
	got, want uint64
}

func checkOffsets(t *testing.T, cases []offsetCase) {
	t.Helper()
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.what, c.got, c.want)
		}
	}
}

func TestEncodeAtomicBytes(t *testing.T) {
	r := mustRing(t, 256, 1)
	s := dirtySlot(t, r)
	wr := SendWR{ID: 3, Opcode: OpAtomicCmpAndSwp, Flags: Signaled, SGEs: []SGE{{Addr: 0x5000, Length: 8, LKey: 0x77}},
		RemoteAddr: 0xabc0, RKey: 0x1234, CompareAdd: 0x1111222233334444, Swap: 0x5555666677778888}
	encodeSend(r.At(0), &wr, 8, 1)
	checkOffsets(t, []offsetCase{
		{"wr.opcode", uint64(ne32(s, 12)), 5},
		{"ex (cleared)", uint64(ne32(s, 20)), 0},
		{"wr.atomic.remote_addr", ne64(s, 24), 0xabc0},
		{"wr.atomic.compare_add", ne64(s, 32), 0x1111222233334444},
		{"wr.atomic.swap", ne64(s, 40), 0x5555666677778888},
		{"wr.atomic.rkey", uint64(ne32(s, 48)), 0x1234},
		{"iova", ne64(s, 152), 0xabc0},
		{"dma.length", uint64(ne32(s, 184)), 8},
		{"dma.num_sge", uint64(ne32(s, 196)), 1},
		{"sge[0].addr", ne64(s, 208), 0x5000},
		{"sge[0].length", uint64(ne32(s, 216)), 8},
	})
	s = dirtySlot(t, r)
	wr.Opcode = OpAtomicFetchAndAdd
	encodeSend(r.At(0), &wr, 8, 1)
	checkOffsets(t, []offsetCase{
		{"FAA wr.opcode", uint64(ne32(s, 12)), 6},
		{"FAA wr.atomic.compare_add (addend)", ne64(s, 32), 0x1111222233334444},
		{"FAA wr.atomic.swap (unused, zero as librxe leaves it)", ne64(s, 40), 0},
	})
}

func TestEncodeAtomicWriteAndFlushBytes(t *testing.T) {
	r := mustRing(t, 256, 1)
	s := dirtySlot(t, r)
	wr := SendWR{ID: 4, Opcode: OpAtomicWrite, RemoteAddr: 0x8000, RKey: 0x99, Swap: 0x0102030405060708}
	encodeSend(r.At(0), &wr, 8, 0)
	checkOffsets(t, []offsetCase{
		{"wr.opcode", uint64(ne32(s, 12)), 15},
		{"wr.rdma.remote_addr", ne64(s, 24), 0x8000},
		{"wr.rdma.rkey", uint64(ne32(s, 32)), 0x99},
		{"iova", ne64(s, 152), 0x8000},
		{"dma.length", uint64(ne32(s, 184)), 8},
		{"dma.resid", uint64(ne32(s, 188)), 8},
		{"dma.num_sge", uint64(ne32(s, 196)), 0},
		{"dma.atomic_wr", ne64(s, 208), 0x0102030405060708},
	})
	s = dirtySlot(t, r)
	wr = SendWR{ID: 5, Opcode: OpFlush, RemoteAddr: 0x9000, RKey: 0xaa, Flush: FlushSpec{Length: 4096, Type: FlushGlobal, Level: FlushMR}}
	encodeSend(r.At(0), &wr, 4096, 0)
	checkOffsets(t, []offsetCase{
		{"wr.opcode", uint64(ne32(s, 12)), 14},
		{"wr.flush.remote_addr", ne64(s, 24), 0x9000},
		{"wr.flush.length", uint64(ne32(s, 32)), 4096},
		{"wr.flush.rkey", uint64(ne32(s, 36)), 0xaa},
		{"wr.flush.type", uint64(s[40]), 1},
		{"wr.flush.level", uint64(s[41]), 1},
		{"iova", ne64(s, 152), 0x9000},
		{"dma.length", uint64(ne32(s, 184)), 4096},
		{"dma.num_sge", uint64(ne32(s, 196)), 0},
	})
}

func TestEncodeWindowOpsBytes(t *testing.T) {
	r := mustRing(t, 256, 1)
	s := dirtySlot(t, r)
	wr := SendWR{ID: 6, Opcode: OpBindMW, Flags: Signaled, Bind: MWBind{
		MWRKey: 0x1200, NewRKey: 0x1201, MRLKey: 0x3400, Addr: 0x7f0000001000, Length: 0x2000,
		Access: uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite}}
	encodeSend(r.At(0), &wr, 0, 0)
	checkOffsets(t, []offsetCase{
		{"wr.opcode", uint64(ne32(s, 12)), 8},
		{"wr.send_flags", uint64(ne32(s, 16)), 2},
		{"wr.mw.addr", ne64(s, 24), 0x7f0000001000},
		{"wr.mw.length", ne64(s, 32), 0x2000},
		{"wr.mw.mr_lkey", uint64(ne32(s, 40)), 0x3400},
		{"wr.mw.mw_rkey", uint64(ne32(s, 44)), 0x1200},
		{"wr.mw.rkey", uint64(ne32(s, 48)), 0x1201},
		{"wr.mw.access", uint64(ne32(s, 52)), 6},
		{"iova (unused)", ne64(s, 152), 0},
		{"dma.length", uint64(ne32(s, 184)), 0},
		{"dma.num_sge", uint64(ne32(s, 196)), 0},
	})
	for _, op := range []Opcode{OpLocalInv, OpSendWithInv} {
		s = dirtySlot(t, r)
		wr = SendWR{ID: 7, Opcode: op, InvRKey: 0xabcdef01}
		encodeSend(r.At(0), &wr, 0, 0)
		checkOffsets(t, []offsetCase{
			{op.String() + " wr.opcode", uint64(ne32(s, 12)), uint64(op)},
			// invalidate_rkey is a host-order __u32, unlike imm_data.
			{op.String() + " ex.invalidate_rkey", uint64(ne32(s, 20)), 0xabcdef01},
			{op.String() + " wr union (cleared)", ne64(s, 24), 0},
		})
	}
}

func TestPostSendExtOpsRefused(t *testing.T) {
	sq, _, db := testQueues(t, 7, 3, testLimits)
	eight := []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}
	for _, c := range []struct {
		name string
		wr   SendWR
		want error
	}{
		{"CAS misaligned", SendWR{Opcode: OpAtomicCmpAndSwp, SGEs: eight, RemoteAddr: 0x1004}, ErrAtomicAlign},
		{"FAA misaligned", SendWR{Opcode: OpAtomicFetchAndAdd, SGEs: eight, RemoteAddr: 0x1001}, ErrAtomicAlign},
		{"CAS 4-byte SGE", SendWR{Opcode: OpAtomicCmpAndSwp, SGEs: []SGE{{Addr: 0x1000, Length: 4, LKey: 1}}}, ErrAtomicSize},
		{"FAA 16-byte SGE", SendWR{Opcode: OpAtomicFetchAndAdd, SGEs: []SGE{{Addr: 0x1000, Length: 16, LKey: 1}}}, ErrAtomicSize},
		{"FAA two 4-byte SGEs", SendWR{Opcode: OpAtomicFetchAndAdd, SGEs: []SGE{{Addr: 0x1000, Length: 4, LKey: 1}, {Addr: 0x1004, Length: 4, LKey: 1}}}, ErrAtomicSize},
		{"CAS no SGE", SendWR{Opcode: OpAtomicCmpAndSwp}, ErrAtomicSize},
		{"CAS inline", SendWR{Opcode: OpAtomicCmpAndSwp, Flags: Inline, Inline: make([]byte, 8)}, ErrAtomicSize},
		{"ATOMIC_WRITE without the device cap", SendWR{Opcode: OpAtomicWrite}, ErrOpNotSupported},
		{"FLUSH without the device cap", SendWR{Opcode: OpFlush, Flush: FlushSpec{Type: FlushGlobal}}, ErrOpNotSupported},
		{"FLUSH bad type", SendWR{Opcode: OpFlush, Flush: FlushSpec{Type: 3}}, ErrInvalidWR},
		{"BIND_MW with SGEs", SendWR{Opcode: OpBindMW, SGEs: eight}, ErrInvalidWR},
		{"LOCAL_INV inline", SendWR{Opcode: OpLocalInv, Flags: Inline}, ErrInvalidWR},
		{"masked CAS (not on rxe)", SendWR{Opcode: 12, SGEs: eight}, ErrInvalidWR},
	} {
		err := sq.post([]SendWR{{Opcode: OpSend}, c.wr})
		if !errors.Is(err, c.want) || !errors.Is(err, c.want.(*postError).errno) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if db.n.Load() != 0 || sq.prod != 0 {
		t.Fatalf("refused requests rang %d doorbells, producer %d", db.n.Load(), sq.prod)
	}
	if !errors.Is(ErrOpNotSupported, uverbs.ErrNotSupported) || !errors.Is(ErrOpNotSupported, unix.EOPNOTSUPP) {
		t.Fatal("ErrOpNotSupported must match uverbs.ErrNotSupported and EOPNOTSUPP")
	}
	sq.caps = opCapsFrom(capAtomicWrite | capFlushGlobal)
	ok := []SendWR{
		{Opcode: OpAtomicCmpAndSwp, SGEs: eight, RemoteAddr: 0x2008},
		{Opcode: OpAtomicFetchAndAdd, SGEs: eight, RemoteAddr: 0x2010},
		{Opcode: OpAtomicWrite, RemoteAddr: 0x2018},
		{Opcode: OpFlush, Flush: FlushSpec{Type: FlushGlobal, Length: 8}},
		{Opcode: OpBindMW},
		{Opcode: OpLocalInv},
		{Opcode: OpSendWithInv, SGEs: eight},
	}
	if err := sq.post(ok); err != nil {
		t.Fatal(err)
	}
	sq.ring.SetConsumer(sq.ring.Producer())
	if err := sq.post([]SendWR{{Opcode: OpFlush, Flush: FlushSpec{Type: FlushPersistent}}}); !errors.Is(err, ErrOpNotSupported) {
		t.Fatalf("persistent flush without its cap: %v", err)
	}
}

func TestPostSendExtOpsZeroAllocs(t *testing.T) {
	sq, _, _ := testQueues(t, 64, 3, testLimits)
	sq.caps = opCapsFrom(capAtomicWrite | capFlushGlobal)
	eight := []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}
	wrs := []SendWR{
		{Opcode: OpAtomicCmpAndSwp, SGEs: eight, RemoteAddr: 0x2008, CompareAdd: 1, Swap: 2},
		{Opcode: OpAtomicFetchAndAdd, SGEs: eight, RemoteAddr: 0x2010, CompareAdd: 1},
		{Opcode: OpBindMW, Bind: MWBind{MWRKey: 1, NewRKey: 2, Length: 8}},
		{Opcode: OpLocalInv, InvRKey: 2},
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := sq.post(wrs); err != nil {
			t.Fatal(err)
		}
		r := sq.ring
		r.SetConsumer(r.Producer()) // the "kernel" consumes them
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per PostSend of atomics and window ops", allocs)
	}
}

func TestExtOpcodeNames(t *testing.T) {
	for op, want := range map[Opcode]string{
		OpAtomicCmpAndSwp: "WR_ATOMIC_CMP_AND_SWP", OpAtomicFetchAndAdd: "WR_ATOMIC_FETCH_AND_ADD", OpLocalInv: "WR_LOCAL_INV",
		OpBindMW: "WR_BIND_MW", OpSendWithInv: "WR_SEND_WITH_INV", OpFlush: "WR_FLUSH", OpAtomicWrite: "WR_ATOMIC_WRITE",
		10: "Opcode(10)", 12: "Opcode(12)", 16: "Opcode(16)",
	} {
		if got := op.String(); got != want {
			t.Errorf("Opcode(%d).String() = %q, want %q", uint32(op), got, want)
		}
	}
	for op, want := range map[WCOpcode]string{
		WCCompSwap: "WC_COMP_SWAP", WCFetchAdd: "WC_FETCH_ADD", WCBindMW: "WC_BIND_MW", WCLocalInv: "WC_LOCAL_INV",
		WCFlush: "WC_FLUSH", WCAtomicWrite: "WC_ATOMIC_WRITE", 7: "WCOpcode(7)",
	} {
		if got := op.String(); got != want {
			t.Errorf("WCOpcode(%d).String() = %q, want %q", uint32(op), got, want)
		}
	}
	// The values are the kernel's enums (ib_user_verbs.h of 6.12).
	for _, c := range []struct {
		got, want uint32
	}{{uint32(OpAtomicCmpAndSwp), 5}, {uint32(OpAtomicFetchAndAdd), 6}, {uint32(OpLocalInv), 7}, {uint32(OpBindMW), 8},
		{uint32(OpSendWithInv), 9}, {uint32(OpFlush), 14}, {uint32(OpAtomicWrite), 15}, {uint32(WCFlush), 8}, {uint32(WCAtomicWrite), 9}} {
		if c.got != c.want {
			t.Errorf("enum value %d, want %d", c.got, c.want)
		}
	}
}
