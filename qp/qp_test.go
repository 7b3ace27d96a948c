package qp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/rxe/rxesim"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// simPair is two connected RC QPs over the simulated kernel, in StateRTS, with a
// registered buffer each.
type simPair struct {
	dev        *rxesim.Device
	a, b       *QP
	sa, sb     *rxesim.QP
	cqA, cqB   *rxesim.CQ
	bufA, bufB []byte
	addA, addB uint64
	keyA, keyB uint32
}

func simQP(t testing.TB, dev *rxesim.Device, cq *rxesim.CQ, cfg rxesim.QPSpec) (*QP, *rxesim.QP) {
	t.Helper()
	s, err := dev.NewQP(cq, cq, cfg)
	if err != nil {
		t.Fatal(err)
	}
	q := &QP{core: s.User, typ: RC, num: s.Num(), cap: Cap{
		MaxSendWR: uint32(cfg.Cap.MaxSendWR), MaxRecvWR: uint32(cfg.Cap.MaxRecvWR),
		MaxSendSGE: uint32(cfg.Cap.MaxSendSGE), MaxRecvSGE: uint32(cfg.Cap.MaxRecvSGE), MaxInlineData: uint32(cfg.Cap.MaxInlineData),
	}}
	q.state.Store(uint32(StateRTS))
	return q, s
}

func newSimPair(t testing.TB, size int) *simPair {
	t.Helper()
	p := &simPair{dev: rxesim.New(), bufA: make([]byte, size), bufB: make([]byte, size)}
	var err error
	if p.cqA, err = p.dev.NewCQ(255); err != nil {
		t.Fatal(err)
	}
	if p.cqB, err = p.dev.NewCQ(255); err != nil {
		t.Fatal(err)
	}
	cfg := rxesim.QPSpec{Cap: uverbs.QPCap{MaxSendWR: 127, MaxRecvWR: 127, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 128}}
	p.a, p.sa = simQP(t, p.dev, p.cqA, cfg)
	p.b, p.sb = simQP(t, p.dev, p.cqB, cfg)
	rxesim.Connect(p.sa, p.sb)
	p.addA, p.keyA = p.dev.Register(p.bufA)
	p.addB, p.keyB = p.dev.Register(p.bufB)
	return p
}

func pollN(t testing.TB, c *rxesim.CQ, n int) []rxe.WC {
	t.Helper()
	wc := make([]rxe.WC, n+1)
	got, err := c.User.Poll(wc)
	if err != nil || got != n {
		t.Fatalf("polled %d (%v), want %d: %+v", got, err, n, wc[:got])
	}
	return wc[:n]
}

func TestPostStateChecks(t *testing.T) {
	p := newSimPair(t, 4096)
	send := []SendWR{{Opcode: Send, Flags: Inline, Inline: []byte("x")}}
	recv := []RecvWR{{ID: 1}}
	for _, s := range []State{StateReset, StateInit, StateRTR} {
		p.a.state.Store(uint32(s))
		if err := p.a.PostSend(send); !errors.Is(err, ErrBadState) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("PostSend in %v: err = %v, want ErrBadState", s, err)
		}
	}
	p.a.state.Store(uint32(StateReset))
	if err := p.a.PostRecv(recv); !errors.Is(err, ErrBadState) {
		t.Errorf("PostRecv in RESET: err = %v", err)
	}
	for _, s := range []State{StateInit, StateRTR, StateRTS} {
		p.b.state.Store(uint32(s))
		if err := p.b.PostRecv(recv); err != nil {
			t.Errorf("PostRecv in %v: %v", s, err)
		}
	}
	if p.sa.Doorbells() != 0 {
		t.Fatalf("%d doorbells from rejected posts", p.sa.Doorbells())
	}
	// In ERROR posting is allowed: the work is flushed.
	p.a.state.Store(uint32(StateError))
	p.sa.SetError()
	if err := p.a.PostSend([]SendWR{{ID: 3, Opcode: Send, Flags: Inline, Inline: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if wc := pollN(t, p.cqA, 1)[0]; wc.WRID != 3 || wc.Status != rxe.WCWRFlushErr {
		t.Fatalf("%+v", wc)
	}
}

func TestSendPayloadsSim(t *testing.T) {
	const max = 1 << 20
	p := newSimPair(t, 2*max)
	for i := range p.bufA {
		p.bufA[i] = byte(i*31 + i>>8)
	}
	for _, size := range []int{1, 7, 64, 1023, 1024, 1025, 4096, 65537, max} {
		for _, op := range []SendOpcode{Send, SendWithImm} {
			clear(p.bufB)
			half := uint32(size / 2)
			// The receive is split in two SGEs, the send in up to three.
			recv := RecvWR{ID: uint64(size), SGEs: []uverbs.SGE{
				{Addr: p.addB, Length: half, LKey: p.keyB},
				{Addr: p.addB + max, Length: uint32(size) - half, LKey: p.keyB},
			}}
			third := uint32(size / 3)
			send := SendWR{ID: uint64(size) + 1, Opcode: op, Flags: Signaled, Imm: uint32(size) ^ 0xa5a5a5a5, SGEs: []uverbs.SGE{
				{Addr: p.addA, Length: third, LKey: p.keyA},
				{Addr: p.addA + uint64(third), Length: uint32(size) - third, LKey: p.keyA},
			}}
			if err := p.b.PostRecv([]RecvWR{recv}); err != nil {
				t.Fatal(err)
			}
			if err := p.a.PostSend([]SendWR{send}); err != nil {
				t.Fatal(err)
			}
			s := pollN(t, p.cqA, 1)[0]
			r := pollN(t, p.cqB, 1)[0]
			if s.Status != rxe.WCSuccess || s.WRID != send.ID || r.Status != rxe.WCSuccess || r.WRID != recv.ID || r.ByteLen != uint32(size) {
				t.Fatalf("size %d %v: send %+v recv %+v", size, op, s, r)
			}
			if (op == SendWithImm) != (r.Flags&rxe.WCWithImm != 0) || (op == SendWithImm && r.Imm != send.Imm) {
				t.Fatalf("size %d %v: imm %#x flags %v", size, op, r.Imm, r.Flags)
			}
			got := append(append([]byte{}, p.bufB[:half]...), p.bufB[max:max+int(uint32(size)-half)]...)
			if !bytes.Equal(got, p.bufA[:size]) {
				t.Fatalf("size %d %v: payload differs", size, op)
			}
		}
	}
}

func TestPostSendErrorsSim(t *testing.T) {
	p := newSimPair(t, 4096)
	sge := uverbs.SGE{Addr: p.addA, Length: 1, LKey: p.keyA}
	if err := p.a.PostSend([]SendWR{{Opcode: Send, SGEs: []uverbs.SGE{sge, sge, sge, sge, sge}}}); !errors.Is(err, ErrTooManySGEs) {
		t.Errorf("5 SGEs: %v", err)
	}
	if err := p.a.PostSend([]SendWR{{Opcode: Send, Flags: Inline, Inline: make([]byte, 129)}}); !errors.Is(err, ErrInlineTooLong) {
		t.Errorf("129 inline bytes: %v", err)
	}
	if err := p.a.PostSend([]SendWR{{Opcode: Send, Flags: Inline, Inline: make([]byte, 128)}}); err != nil {
		t.Errorf("128 inline bytes: %v", err)
	}
	if err := p.b.PostRecv([]RecvWR{{SGEs: []uverbs.SGE{sge, sge, sge, sge, sge}}}); !errors.Is(err, ErrTooManySGEs) {
		t.Errorf("5 receive SGEs: %v", err)
	}
	full := make([]RecvWR, 128)
	if err := p.b.PostRecv(full); err != ErrQueueFull || !errors.Is(err, unix.ENOMEM) || !errors.Is(err, rxe.ErrQueueFull) {
		t.Errorf("128 receives into 127 slots: %v", err)
	}
	if err := p.b.PostRecv(full[:127]); err != nil {
		t.Errorf("127 receives: %v", err)
	}
}

func TestSendQueueFullSim(t *testing.T) {
	p := newSimPair(t, 4096)
	// Nothing receives: sends stall in the ring, as with RNR NAKs.
	wrs := make([]SendWR, 127)
	for i := range wrs {
		wrs[i] = SendWR{ID: uint64(i), Opcode: Send, Flags: Inline | Signaled, Inline: []byte{byte(i)}}
	}
	if err := p.a.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	if err := p.a.PostSend(wrs[:1]); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("post to a full send queue: %v", err)
	}
	if p.sa.Doorbells() != 1 {
		t.Fatalf("%d doorbells for one call of 127 WRs", p.sa.Doorbells())
	}
	recvs := make([]RecvWR, 127)
	for i := range recvs {
		recvs[i] = RecvWR{ID: uint64(i), SGEs: []uverbs.SGE{{Addr: p.addB + uint64(i), Length: 1, LKey: p.keyB}}}
	}
	if err := p.b.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	p.dev.Process()
	if wcs := pollN(t, p.cqB, 127); wcs[126].WRID != 126 || p.bufB[126] != 126 {
		t.Fatalf("last receive %+v, byte %d", wcs[126], p.bufB[126])
	}
	pollN(t, p.cqA, 127)
	if err := p.a.PostSend(wrs[:1]); err != nil {
		t.Fatalf("post after the queue drained: %v", err)
	}
}

func TestPostZeroAllocsSim(t *testing.T) {
	p := newSimPair(t, 4096)
	sends := []SendWR{
		{ID: 1, Opcode: SendWithImm, Flags: Signaled, Imm: 7, SGEs: []uverbs.SGE{{Addr: p.addA, Length: 64, LKey: p.keyA}}},
		{ID: 2, Opcode: Send, Flags: Inline, Inline: p.bufA[:32]},
	}
	recvs := []RecvWR{
		{ID: 1, SGEs: []uverbs.SGE{{Addr: p.addB, Length: 64, LKey: p.keyB}}},
		{ID: 2, SGEs: []uverbs.SGE{{Addr: p.addB + 64, Length: 64, LKey: p.keyB}}},
	}
	wc := make([]rxe.WC, 4)
	allocs := testing.AllocsPerRun(2000, func() {
		if err := p.b.PostRecv(recvs); err != nil {
			t.Fatal(err)
		}
		if err := p.a.PostSend(sends); err != nil {
			t.Fatal(err)
		}
		if n, _ := p.cqA.User.Poll(wc); n != 1 {
			t.Fatalf("send completions %d", n)
		}
		if n, _ := p.cqB.User.Poll(wc); n != 2 {
			t.Fatalf("receive completions %d", n)
		}
		// One request at a time: the provider's copy is on the stack.
		if err := p.b.PostRecv(recvs[:1]); err != nil {
			t.Fatal(err)
		}
		if err := p.a.PostSend(sends[:1]); err != nil {
			t.Fatal(err)
		}
		if n, _ := p.cqA.User.Poll(wc); n != 1 {
			t.Fatalf("send completions %d", n)
		}
		if n, _ := p.cqB.User.Poll(wc); n != 1 {
			t.Fatalf("receive completions %d", n)
		}
		// Rejections allocate nothing either.
		if err := p.a.PostSend(sends[:0:0]); err != nil {
			t.Fatal(err)
		}
		if err := p.a.PostSend([]SendWR{{Opcode: Send, Flags: Inline, Inline: p.bufA[:129]}}); err == nil {
			t.Fatal("long inline posted")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per post/poll round, want 0", allocs)
	}
}

// BenchmarkSimSendRoundTrip is one signaled 64-byte inline SEND through
// the simulated kernel: a receive posted on b, the send posted on a (WQE
// write, producer store, and a doorbell that makes rxesim execute the
// send: copy, both completions), then both completions polled. Most of its
// time is the simulator's; BenchmarkPostSend times the posting alone.
func BenchmarkSimSendRoundTrip(b *testing.B) {
	p := newSimPair(b, 4096)
	send := []SendWR{{ID: 1, Opcode: Send, Flags: Signaled | Inline, Inline: p.bufA[:64]}}
	recv := []RecvWR{{ID: 1, SGEs: []uverbs.SGE{{Addr: p.addB, Length: 64, LKey: p.keyB}}}}
	wc := make([]rxe.WC, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.b.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
		if err := p.a.PostSend(send); err != nil {
			b.Fatal(err)
		}
		if n, _ := p.cqA.User.Poll(wc); n != 1 {
			b.Fatal("no send completion")
		}
		if n, _ := p.cqB.User.Poll(wc); n != 1 {
			b.Fatal("no receive completion")
		}
	}
}

// BenchmarkPostSendBatch posts 16 SEND WQEs per call (one doorbell) and
// polls their completions; ns/op is per call.
func BenchmarkPostSendBatch(b *testing.B) {
	p := newSimPair(b, 4096)
	sends := make([]SendWR, 16)
	recvs := make([]RecvWR, 16)
	for i := range sends {
		sends[i] = SendWR{ID: uint64(i), Opcode: Send, Flags: Signaled, SGEs: []uverbs.SGE{{Addr: p.addA, Length: 256, LKey: p.keyA}}}
		recvs[i] = RecvWR{ID: uint64(i), SGEs: []uverbs.SGE{{Addr: p.addB, Length: 256, LKey: p.keyB}}}
	}
	wc := make([]rxe.WC, 16)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.b.PostRecv(recvs); err != nil {
			b.Fatal(err)
		}
		if err := p.a.PostSend(sends); err != nil {
			b.Fatal(err)
		}
		if n, _ := p.cqA.User.Poll(wc); n != 16 {
			b.Fatal("missing send completions")
		}
		if n, _ := p.cqB.User.Poll(wc); n != 16 {
			b.Fatal("missing receive completions")
		}
	}
}

// BenchmarkPostSend is the send hot path as pureverbs runs it: one signaled
// 64-byte inline SEND checked, written into its ring slot, published by the
// producer store, and the doorbell called. The doorbell costs nothing here
// (no kernel, no simulator executing the send); on rxe it is one write()
// (BenchmarkUverbsPostSendDoorbell in integration/ times it in the VM).
func BenchmarkPostSend(b *testing.B) {
	dev := rxesim.New()
	c, err := dev.NewCQ(1)
	if err != nil {
		b.Fatal(err)
	}
	lim := uverbs.QPCap{MaxSendWR: 127, MaxSendSGE: 1, MaxInlineData: 128}
	k, err := dev.NewQP(c, c, rxesim.QPSpec{Cap: lim, Sink: true})
	if err != nil {
		b.Fatal(err)
	}
	q := &QP{core: k.User, typ: RC, cap: Cap{MaxSendWR: 127, MaxSendSGE: 1, MaxInlineData: 128}}
	q.state.Store(uint32(StateRTS))
	payload := make([]byte, 64)
	send := []SendWR{{ID: 1, Opcode: Send, Flags: Signaled | Inline, Inline: payload}}
	b.ReportAllocs()
	for b.Loop() {
		if err := q.PostSend(send); err != nil {
			b.Fatal(err)
		}
	}
	if k.Doorbells() == 0 {
		b.Fatal("the doorbell never rang")
	}
}

// New refuses what it cannot create before asking the kernel, and fills in
// the documented defaults for zero counts (the VM test TestQPNewDefaults
// checks that the kernel got them, and Modify's state tracking).
func TestNewArguments(t *testing.T) {
	if _, err := New(nil, Spec{Type: Type(8)}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("New(QP type 8) = %v, want ErrNotSupported", err)
	}
	if _, err := New(nil, Spec{Type: RC}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("New(RC) without CQs = %v, want EINVAL", err)
	}
	if got, want := (Cap{}).withDefaults(), (Cap{MaxSendWR: 128, MaxRecvWR: 128, MaxSendSGE: 1, MaxRecvSGE: 1}); got != want {
		t.Errorf("zero Cap with defaults = %+v, want %+v", got, want)
	}
	asked := Cap{MaxSendWR: 5, MaxRecvSGE: 3, MaxInlineData: 64}
	if got, want := asked.withDefaults(), (Cap{MaxSendWR: 5, MaxRecvWR: 128, MaxSendSGE: 1, MaxRecvSGE: 3, MaxInlineData: 64}); got != want {
		t.Errorf("%+v with defaults = %+v, want %+v", asked, got, want)
	}
}

// A closed QP answers every post with ErrClosed, whatever state it was
// left in: not ErrBadState, which would tell the caller to modify it.
func TestPostOnClosedQP(t *testing.T) {
	p := newSimPair(t, 4096)
	for _, s := range []State{StateReset, StateInit, StateRTS} {
		q, _ := simQP(t, p.dev, p.cqA, rxesim.QPSpec{Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		q.state.Store(uint32(s))
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		if err := q.PostSend([]SendWR{{Opcode: Send, Flags: Inline, Inline: []byte("x")}}); !errors.Is(err, ErrClosed) {
			t.Errorf("PostSend on a QP closed in %v = %v, want ErrClosed", s, err)
		}
		if err := q.PostRecv([]RecvWR{{ID: 1}}); !errors.Is(err, ErrClosed) {
			t.Errorf("PostRecv on a QP closed in %v = %v, want ErrClosed", s, err)
		}
	}
}

// The transitions of a closed QP answer ErrClosed before they look at its
// state or their parameters: not ErrBadState or EINVAL, which would tell
// the caller to fix a call that can never succeed.
func TestTransitionsOnClosedQP(t *testing.T) {
	p := newSimPair(t, 4096)
	sgid := uverbs.GIDEntry{GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 15: 1}, Index: 1, Port: 1, Type: uverbs.GIDTypeRoCEv2}
	peer := Peer{QPN: 5, PSN: 7, GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 15: 2}}
	for _, s := range []State{StateReset, StateInit, StateRTR, StateRTS} {
		q, _ := simQP(t, p.dev, p.cqA, rxesim.QPSpec{Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		q.state.Store(uint32(s))
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		if err := q.Connect(peer, ConnectOptions{SGID: sgid}); !errors.Is(err, ErrClosed) {
			t.Errorf("Connect of a QP closed in %v = %v, want ErrClosed", s, err)
		}
		if err := q.ToRTR(RTRParams{}); !errors.Is(err, ErrClosed) {
			t.Errorf("ToRTR of a QP closed in %v = %v, want ErrClosed", s, err)
		}
		q.typ = UD
		if err := q.ActivateUD(UDOptions{}); !errors.Is(err, ErrClosed) {
			t.Errorf("ActivateUD of a QP closed in %v = %v, want ErrClosed", s, err)
		}
	}
}
