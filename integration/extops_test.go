//go:build integration

package integration

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// ATOMIC_WRITE and FLUSH. On 6.1 the device does not advertise them and
// PostSend refuses both before posting with an error matching
// uverbs.ErrNotSupported; on 6.2+ an ATOMIC_WRITE stores its 8 bytes and
// a FLUSH of a region granting FLUSH_GLOBAL, on a QP granting it, completes.
func TestAtomicWriteFlush(t *testing.T) {
	access := allRemote
	if kernelAtLeast(t, 6, 2) {
		// The responder checks FLUSH against the QP's access too
		// (without it: REM_INV_REQ_ERR); 6.1's modify_qp would refuse it.
		access |= uverbs.AccessFlushGlobal
	}
	a, b := opsPairAccess(t, endOpts{}, access)
	attr, err := a.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	const capAtomicWrite, capFlushGlobal = 1 << 40, 1 << 38
	t.Logf("device cap flags %#x", attr.DeviceCapFlags)
	if !kernelAtLeast(t, 6, 2) {
		if attr.DeviceCapFlags&(capAtomicWrite|capFlushGlobal) != 0 {
			t.Fatalf("6.1 advertises ATOMIC_WRITE/FLUSH: %#x", attr.DeviceCapFlags)
		}
		for _, wr := range []qp.SendWR{
			{ID: 1, Opcode: qp.AtomicWrite, Flags: qp.Signaled, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(), Swap: 1},
			{ID: 2, Opcode: qp.Flush, Flags: qp.Signaled, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(), Flush: qp.FlushSpec{Length: 64, Type: qp.FlushGlobal}},
		} {
			err := a.qp.PostSend([]qp.SendWR{wr})
			if !errors.Is(err, uverbs.ErrNotSupported) || !errors.Is(err, qp.ErrOpNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
				t.Fatalf("%v on 6.1: %v, want not supported", wr.Opcode, err)
			}
		}
		// The region access flag for FLUSH is unknown to 6.1 as well.
		buf, err := uverbs.NewBuffer(4096, uverbs.BufferOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Close()
		if mr, err := b.pd.RegisterMR(buf, uverbs.AccessLocalWrite|uverbs.AccessFlushGlobal); err == nil {
			t.Logf("6.1 registers an MR with FLUSH_GLOBAL access")
			mr.Close()
		} else {
			t.Logf("6.1 refuses FLUSH_GLOBAL access: %v", err)
		}
		quiet(t, a.cq, "after the refused requests")
		post(t, a, qp.SendWR{ID: 3, Opcode: qp.RDMAWrite, Flags: qp.Signaled, SGEs: []uverbs.SGE{mustSGE(t, a.mr, 0, 8)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
		wantWC(t, "write after the refusals", completion(t, a), 3, cq.Success, cq.OpRDMAWrite)
		return
	}
	if attr.DeviceCapFlags&(capAtomicWrite|capFlushGlobal) != capAtomicWrite|capFlushGlobal {
		t.Fatalf("6.12 does not advertise ATOMIC_WRITE and FLUSH_GLOBAL: %#x", attr.DeviceCapFlags)
	}
	target := extraMR(t, b, 4096, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead|uverbs.AccessFlushGlobal)
	mem := target.Buffer().Bytes()
	for i := range mem {
		mem[i] = 0x5a
	}
	const v = 0x1122334455667788
	post(t, a, qp.SendWR{ID: 1, Opcode: qp.AtomicWrite, Flags: qp.Signaled, RemoteAddr: target.Addr() + 256, RKey: target.RKey(), Swap: v})
	w := completion(t, a)
	wantWC(t, "ATOMIC_WRITE", w, 1, cq.Success, cq.OpAtomicWrite)
	if got := binary.NativeEndian.Uint64(mem[256:]); got != v {
		t.Fatalf("memory %#x after ATOMIC_WRITE, want %#x", got, uint64(v))
	}
	if !allBytes(mem[:256], 0x5a) || !allBytes(mem[264:], 0x5a) {
		t.Fatal("ATOMIC_WRITE touched bytes beside its word")
	}
	if err := a.qp.PostSend([]qp.SendWR{{Opcode: qp.AtomicWrite, RemoteAddr: target.Addr() + 4, RKey: target.RKey()}}); !errors.Is(err, qp.ErrAtomicAlign) {
		t.Fatalf("misaligned ATOMIC_WRITE: %v", err)
	}
	post(t, a, qp.SendWR{ID: 2, Opcode: qp.Flush, Flags: qp.Signaled, RemoteAddr: target.Addr(), RKey: target.RKey(),
		Flush: qp.FlushSpec{Length: 4096, Type: qp.FlushGlobal, Level: qp.FlushRange}})
	wantWC(t, "FLUSH range", completion(t, a), 2, cq.Success, cq.OpFlush)
	post(t, a, qp.SendWR{ID: 3, Opcode: qp.Flush, Flags: qp.Signaled, RemoteAddr: target.Addr(), RKey: target.RKey(),
		Flush: qp.FlushSpec{Type: qp.FlushGlobal, Level: qp.FlushMR}})
	wantWC(t, "FLUSH MR", completion(t, a), 3, cq.Success, cq.OpFlush)
	// A region without FLUSH_GLOBAL refuses a FLUSH (the QP ends in error).
	plain := extraMR(t, b, 4096, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	post(t, a, qp.SendWR{ID: 4, Opcode: qp.Flush, Flags: qp.Signaled, RemoteAddr: plain.Addr(), RKey: plain.RKey(),
		Flush: qp.FlushSpec{Length: 64, Type: qp.FlushGlobal}})
	w = completion(t, a)
	t.Logf("FLUSH of a region without FLUSH_GLOBAL: %v", w.Status)
	if w.WRID != 4 || w.Status == cq.Success {
		t.Fatalf("FLUSH of a region without FLUSH_GLOBAL: id %d %v", w.WRID, w.Status)
	}
}

// rereg_mr: rxe has it from 6.5 on (uverbs.HaveReregMR); on 6.1 Rereg's
// error matches uverbs.ErrNotSupported. On 6.5+ new access makes a region writable from
// the peer (WRITE lands under the new rkey), and a move to another PD
// makes it unreachable from the responder QP's PD (REM_ACCESS_ERR, memory
// untouched).
func TestReregMR(t *testing.T) {
	a, b := opsPair(t, endOpts{})
	pd2, err := b.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "PD 2", pd2.Close()) })
	target := extraMR(t, b, 4096, uverbs.AccessLocalWrite)
	mem := target.Buffer().Bytes()
	for i := range mem {
		mem[i] = 0x5a
	}
	access := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite
	err = target.Rereg(nil, &access)
	if !kernelAtLeast(t, 6, 5) {
		if !errors.Is(err, uverbs.ErrNotSupported) {
			t.Fatalf("rereg_mr on 6.1: %v, want ErrNotSupported", err)
		}
		t.Logf("6.1: %v", err)
		if err := target.Rereg(pd2, nil); !errors.Is(err, uverbs.ErrNotSupported) {
			t.Fatalf("rereg_mr (PD) on 6.1: %v, want ErrNotSupported", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	src := a.buf.Bytes()[:32]
	for i := range src {
		src[i] = 0x77
	}
	post(t, a, qp.SendWR{ID: 1, Opcode: qp.RDMAWrite, Flags: qp.Signaled, SGEs: []uverbs.SGE{mustSGE(t, a.mr, 0, 32)}, RemoteAddr: target.Addr(), RKey: target.RKey()})
	wantWC(t, "write after rereg (access)", completion(t, a), 1, cq.Success, cq.OpRDMAWrite)
	if !allBytes(mem[:32], 0x77) || !allBytes(mem[32:], 0x5a) {
		t.Fatal("the write after rereg did not land exactly")
	}
	if err := target.Rereg(pd2, nil); err != nil {
		t.Fatal(err)
	}
	for i := range src {
		src[i] = 0x88
	}
	post(t, a, qp.SendWR{ID: 2, Opcode: qp.RDMAWrite, Flags: qp.Signaled, SGEs: []uverbs.SGE{mustSGE(t, a.mr, 0, 32)}, RemoteAddr: target.Addr(), RKey: target.RKey()})
	if w := completion(t, a); w.Status != cq.RemAccessErr {
		t.Fatalf("write into a region moved to another PD: %v, want REM_ACCESS_ERR", w.Status)
	}
	if !allBytes(mem[:32], 0x77) {
		t.Fatal("the refused write changed the region")
	}
}

// Which right an ATOMIC_WRITE needs (6.2+): the MR's REMOTE_WRITE. Into an
// MR granting only REMOTE_ATOMIC it is refused (REM_ACCESS_ERR) and the
// word stays; into one granting only REMOTE_WRITE it lands.
func TestAtomicWriteNeedsRemoteWrite(t *testing.T) {
	if !kernelAtLeast(t, 6, 2) {
		t.Skip("ATOMIC_WRITE exists from kernel 6.2 on (TestAtomicWriteFlush covers the refusal on 6.1)")
	}
	for _, c := range []struct {
		name   string
		access uverbs.Access
		ok     bool
	}{
		{"REMOTE_WRITE only", uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite, true},
		{"REMOTE_ATOMIC only", uverbs.AccessLocalWrite | uverbs.AccessRemoteAtomic, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := opsPair(t, endOpts{})
			target := extraMR(t, b, 4096, c.access)
			mem := target.Buffer().Bytes()
			binary.NativeEndian.PutUint64(mem, 42)
			post(t, a, qp.SendWR{ID: 1, Opcode: qp.AtomicWrite, Flags: qp.Signaled, RemoteAddr: target.Addr(), RKey: target.RKey(), Swap: 7})
			w := completion(t, a)
			got := binary.NativeEndian.Uint64(mem)
			t.Logf("%s: %v, word %d", c.name, w.Status, got)
			if c.ok && (w.Status != cq.Success || got != 7) || !c.ok && (w.Status != cq.RemAccessErr || got != 42) {
				t.Fatalf("ATOMIC_WRITE into an MR with %v: %v, word %d", c.access, w.Status, got)
			}
		})
	}
}
