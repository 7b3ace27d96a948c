//go:build integration

package integration

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Fetch-and-add and compare-and-swap (hit and miss) from rxe0 into an MR
// on rxe1 that grants only REMOTE_ATOMIC: each old value lands in the
// requester's 8-byte SGE, and the responder's memory holds the result.
// Misaligned and wrongly sized requests are refused before posting.
func TestRCAtomics(t *testing.T) {
	a, b := opsPair(t, endOpts{})
	target := extraMR(t, b, 4096, uverbs.AccessLocalWrite|uverbs.AccessRemoteAtomic)
	mem := target.Buffer().Bytes()
	const off = 64 // an aligned word, with neighbours that must not change
	for i := range mem[:256] {
		mem[i] = 0xa5
	}
	word := func() uint64 { return binary.NativeEndian.Uint64(mem[off:]) }
	binary.NativeEndian.PutUint64(mem[off:], 100)
	old := func(slot int) uint64 { return binary.NativeEndian.Uint64(a.buf.Bytes()[8*slot:]) }
	remote := target.Addr() + off

	steps := []struct {
		wr      qp.SendWR
		op      cq.Opcode
		old     uint64
		memory  uint64
		comment string
	}{
		{qp.SendWR{Opcode: qp.AtomicFetchAndAdd, CompareAdd: 0xffff_0000_0000_0005}, cq.OpFetchAdd, 100, 0xffff_0000_0000_0069, "FAA carries across 64 bits"},
		{qp.SendWR{Opcode: qp.AtomicCmpAndSwp, CompareAdd: 0xffff_0000_0000_0069, Swap: 7}, cq.OpCompSwap, 0xffff_0000_0000_0069, 7, "CAS hit swaps"},
		{qp.SendWR{Opcode: qp.AtomicCmpAndSwp, CompareAdd: 8, Swap: 9}, cq.OpCompSwap, 7, 7, "CAS miss leaves memory"},
		{qp.SendWR{Opcode: qp.AtomicFetchAndAdd, CompareAdd: ^uint64(6)}, cq.OpFetchAdd, 7, 0, "FAA wraps"},
	}
	for i, s := range steps {
		wr := s.wr
		wr.ID, wr.Flags, wr.RemoteAddr, wr.RKey = uint64(i+1), qp.Signaled, remote, target.RKey()
		wr.SGEs = []uverbs.SGE{mustSGE(t, a.mr, 8*i, 8)}
		post(t, a, wr)
		w := completion(t, a)
		wantWC(t, s.comment, w, uint64(i+1), cq.Success, s.op)
		if w.ByteLen != 8 {
			t.Errorf("%s: byte_len %d, want 8", s.comment, w.ByteLen)
		}
		if got := old(i); got != s.old {
			t.Errorf("%s: old value %#x, want %#x", s.comment, got, s.old)
		}
		if got := word(); got != s.memory {
			t.Errorf("%s: memory %#x, want %#x", s.comment, got, s.memory)
		}
	}
	for i := range mem[:256] {
		if (i < off || i >= off+8) && mem[i] != 0xa5 {
			t.Fatalf("byte %d next to the word changed to %#x", i, mem[i])
		}
	}

	// Refused before posting: nothing reaches the ring, the CQ stays quiet
	// and the QP keeps working.
	eight := []uverbs.SGE{mustSGE(t, a.mr, 0, 8)}
	for _, c := range []struct {
		name string
		wr   qp.SendWR
		want error
	}{
		{"CAS at +4", qp.SendWR{Opcode: qp.AtomicCmpAndSwp, SGEs: eight, RemoteAddr: remote + 4}, qp.ErrAtomicAlign},
		{"FAA at +1", qp.SendWR{Opcode: qp.AtomicFetchAndAdd, SGEs: eight, RemoteAddr: remote + 1}, qp.ErrAtomicAlign},
		{"FAA into 4 bytes", qp.SendWR{Opcode: qp.AtomicFetchAndAdd, SGEs: []uverbs.SGE{mustSGE(t, a.mr, 0, 4)}, RemoteAddr: remote}, qp.ErrAtomicSize},
		{"CAS into 16 bytes", qp.SendWR{Opcode: qp.AtomicCmpAndSwp, SGEs: []uverbs.SGE{mustSGE(t, a.mr, 0, 16)}, RemoteAddr: remote}, qp.ErrAtomicSize},
	} {
		c.wr.Flags, c.wr.RKey = qp.Signaled, target.RKey()
		if err := a.qp.PostSend([]qp.SendWR{c.wr}); !errors.Is(err, c.want) {
			t.Errorf("%s: PostSend = %v, want %v", c.name, err, c.want)
		}
	}
	quiet(t, a.cq, "after refused atomics")
	post(t, a, qp.SendWR{ID: 99, Opcode: qp.AtomicFetchAndAdd, Flags: qp.Signaled, CompareAdd: 1, RemoteAddr: remote, RKey: target.RKey(), SGEs: eight})
	wantWC(t, "FAA after the refusals", completion(t, a), 99, cq.Success, cq.OpFetchAdd)
	if word() != 1 {
		t.Fatalf("memory %#x after the last FAA, want 1", word())
	}
}
