package rxesim

import (
	"bytes"
	"testing"

	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
)

type pair struct {
	dev          *Device
	a, b         *QP
	cqA, cqB     *CQ
	bufA, bufB   []byte
	addrA, addrB uint64
	keyA, keyB   uint32
}

func newPair(t testing.TB, sigAll bool) *pair {
	t.Helper()
	p := &pair{dev: New(), bufA: make([]byte, 1<<16), bufB: make([]byte, 1<<16)}
	var err error
	if p.cqA, err = p.dev.NewCQ(63); err != nil {
		t.Fatal(err)
	}
	if p.cqB, err = p.dev.NewCQ(63); err != nil {
		t.Fatal(err)
	}
	cfg := QPSpec{Cap: uverbs.QPCap{MaxSendWR: 31, MaxRecvWR: 31, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}, SigAll: sigAll}
	if p.a, err = p.dev.NewQP(p.cqA, p.cqA, cfg); err != nil {
		t.Fatal(err)
	}
	if p.b, err = p.dev.NewQP(p.cqB, p.cqB, cfg); err != nil {
		t.Fatal(err)
	}
	Connect(p.a, p.b)
	p.addrA, p.keyA = p.dev.Register(p.bufA)
	p.addrB, p.keyB = p.dev.Register(p.bufB)
	return p
}

func poll(t testing.TB, c *CQ, want int) []rxe.WC {
	t.Helper()
	wc := make([]rxe.WC, want+1)
	n, err := c.User.Poll(wc)
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("polled %d completions, want %d: %+v", n, want, wc[:n])
	}
	return wc[:n]
}

func TestSendScatterGather(t *testing.T) {
	p := newPair(t, false)
	for i := range p.bufA[:300] {
		p.bufA[i] = byte(i * 7)
	}
	// Receive into two pieces of B, send from three pieces of A.
	recv := rxe.RecvWR{ID: 100, SGEs: []rxe.SGE{{Addr: p.addrB + 1000, Length: 100, LKey: p.keyB}, {Addr: p.addrB + 5000, Length: 400, LKey: p.keyB}}}
	if err := p.b.User.PostRecv([]rxe.RecvWR{recv}); err != nil {
		t.Fatal(err)
	}
	send := rxe.SendWR{ID: 1, Opcode: rxe.OpSendWithImm, Flags: rxe.Signaled, Imm: 0xfeedf00d, SGEs: []rxe.SGE{
		{Addr: p.addrA, Length: 50, LKey: p.keyA}, {Addr: p.addrA + 50, Length: 150, LKey: p.keyA}, {Addr: p.addrA + 200, Length: 100, LKey: p.keyA},
	}}
	if err := p.a.User.PostSend([]rxe.SendWR{send}); err != nil {
		t.Fatal(err)
	}
	got := append(append([]byte{}, p.bufB[1000:1100]...), p.bufB[5000:5200]...)
	if !bytes.Equal(got, p.bufA[:300]) {
		t.Fatal("payload differs")
	}
	if p.bufB[5200] != 0 {
		t.Fatal("wrote past the payload")
	}
	s := poll(t, p.cqA, 1)[0]
	if s.WRID != 1 || s.Status != rxe.WCSuccess || s.Opcode != rxe.WCSend || s.ByteLen != 300 || s.QPNum != p.a.Num() {
		t.Fatalf("send completion %+v", s)
	}
	r := poll(t, p.cqB, 1)[0]
	if r.WRID != 100 || r.Status != rxe.WCSuccess || r.Opcode != rxe.WCRecv || r.ByteLen != 300 ||
		r.Imm != 0xfeedf00d || r.Flags != rxe.WCWithImm || r.QPNum != p.b.Num() || r.SrcQP != p.a.Num() {
		t.Fatalf("receive completion %+v", r)
	}
	if p.a.Doorbells() != 1 {
		t.Fatalf("%d doorbells", p.a.Doorbells())
	}
}

func TestUnsignaledAndSigAll(t *testing.T) {
	for _, sigAll := range []bool{false, true} {
		p := newPair(t, sigAll)
		recvs := make([]rxe.RecvWR, 4)
		for i := range recvs {
			recvs[i] = rxe.RecvWR{ID: uint64(i), SGEs: []rxe.SGE{{Addr: p.addrB + uint64(i)*64, Length: 64, LKey: p.keyB}}}
		}
		if err := p.b.User.PostRecv(recvs); err != nil {
			t.Fatal(err)
		}
		sends := []rxe.SendWR{
			{ID: 1, Opcode: rxe.OpSend, Flags: rxe.Inline, Inline: []byte("a")},
			{ID: 2, Opcode: rxe.OpSend, Flags: rxe.Inline | rxe.Signaled, Inline: []byte("bb")},
			{ID: 3, Opcode: rxe.OpSend, Flags: rxe.Inline, Inline: []byte("ccc")},
			{ID: 4, Opcode: rxe.OpSend, Flags: rxe.Inline | rxe.Signaled, Inline: []byte("dddd")},
		}
		if err := p.a.User.PostSend(sends); err != nil {
			t.Fatal(err)
		}
		want := 2
		if sigAll {
			want = 4
		}
		wcs := poll(t, p.cqA, want)
		if !sigAll && (wcs[0].WRID != 2 || wcs[1].WRID != 4) {
			t.Fatalf("signaled completions %+v", wcs)
		}
		for i, r := range poll(t, p.cqB, 4) {
			if r.ByteLen != uint32(i+1) || string(p.bufB[i*64:i*64+i+1]) != string(sends[i].Inline) {
				t.Fatalf("receive %d: %+v %q", i, r, p.bufB[i*64:i*64+4])
			}
		}
	}
}

func TestRNRWaitsForReceive(t *testing.T) {
	p := newPair(t, true)
	if err := p.a.User.PostSend([]rxe.SendWR{{ID: 7, Opcode: rxe.OpSend, Flags: rxe.Inline, Inline: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	poll(t, p.cqA, 0)
	if err := p.b.User.PostRecv([]rxe.RecvWR{{ID: 8, SGEs: []rxe.SGE{{Addr: p.addrB, Length: 8, LKey: p.keyB}}}}); err != nil {
		t.Fatal(err)
	}
	p.dev.Process()
	if wc := poll(t, p.cqA, 1)[0]; wc.WRID != 7 || wc.Status != rxe.WCSuccess {
		t.Fatalf("%+v", wc)
	}
	if wc := poll(t, p.cqB, 1)[0]; wc.WRID != 8 || p.bufB[0] != 'x' {
		t.Fatalf("%+v", wc)
	}
}

func TestBadLKeyAndFlush(t *testing.T) {
	p := newPair(t, false)
	recvs := []rxe.RecvWR{{ID: 1, SGEs: []rxe.SGE{{Addr: p.addrB, Length: 64, LKey: p.keyB}}}, {ID: 2}, {ID: 3}}
	if err := p.b.User.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	// Unsignaled, but an error completes anyway; what follows is flushed.
	sends := []rxe.SendWR{
		{ID: 10, Opcode: rxe.OpSend, SGEs: []rxe.SGE{{Addr: p.addrA, Length: 8, LKey: 0xdead}}},
		{ID: 11, Opcode: rxe.OpSend, SGEs: []rxe.SGE{{Addr: p.addrA, Length: 8, LKey: p.keyA}}},
	}
	if err := p.a.User.PostSend(sends); err != nil {
		t.Fatal(err)
	}
	wcs := poll(t, p.cqA, 2)
	if wcs[0].WRID != 10 || wcs[0].Status != rxe.WCLocProtErr || wcs[1].WRID != 11 || wcs[1].Status != rxe.WCWRFlushErr {
		t.Fatalf("%+v", wcs)
	}
	poll(t, p.cqB, 0) // B is fine: nothing reached it
	p.b.SetError()
	for i, wc := range poll(t, p.cqB, 3) {
		if wc.WRID != uint64(i+1) || wc.Status != rxe.WCWRFlushErr {
			t.Fatalf("flush %d: %+v", i, wc)
		}
	}
}

func TestRecvTooSmall(t *testing.T) {
	p := newPair(t, false)
	if err := p.b.User.PostRecv([]rxe.RecvWR{{ID: 1, SGEs: []rxe.SGE{{Addr: p.addrB, Length: 4, LKey: p.keyB}}}}); err != nil {
		t.Fatal(err)
	}
	if err := p.a.User.PostSend([]rxe.SendWR{{ID: 2, Opcode: rxe.OpSend, Flags: rxe.Inline, Inline: []byte("too long")}}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, p.cqB, 1)[0]; wc.Status != rxe.WCLocLenErr {
		t.Fatalf("%+v", wc)
	}
	if wc := poll(t, p.cqA, 1)[0]; wc.Status != rxe.WCRemInvReqErr {
		t.Fatalf("%+v", wc)
	}
}

func TestRDMAWriteRead(t *testing.T) {
	p := newPair(t, true)
	copy(p.bufA, "write me")
	if err := p.b.User.PostRecv([]rxe.RecvWR{{ID: 50}}); err != nil {
		t.Fatal(err)
	}
	err := p.a.User.PostSend([]rxe.SendWR{
		{ID: 1, Opcode: rxe.OpRDMAWrite, SGEs: []rxe.SGE{{Addr: p.addrA, Length: 5, LKey: p.keyA}}, RemoteAddr: p.addrB + 100, RKey: p.keyB},
		{ID: 2, Opcode: rxe.OpRDMAWriteWithImm, Imm: 9, SGEs: []rxe.SGE{{Addr: p.addrA + 5, Length: 3, LKey: p.keyA}}, RemoteAddr: p.addrB + 105, RKey: p.keyB},
		{ID: 3, Opcode: rxe.OpRDMARead, SGEs: []rxe.SGE{{Addr: p.addrA + 200, Length: 8, LKey: p.keyA}}, RemoteAddr: p.addrB + 100, RKey: p.keyB},
		{ID: 4, Opcode: rxe.OpRDMAWrite, Flags: rxe.Inline, Inline: []byte("!"), RemoteAddr: p.addrB + 1<<16, RKey: p.keyB},
	})
	if err != nil {
		t.Fatal(err)
	}
	wcs := poll(t, p.cqA, 4)
	for i, want := range []rxe.WCOpcode{rxe.WCRDMAWrite, rxe.WCRDMAWrite, rxe.WCRDMARead} {
		if wcs[i].Status != rxe.WCSuccess || wcs[i].Opcode != want {
			t.Fatalf("completion %d: %+v", i, wcs[i])
		}
	}
	if wcs[3].Status != rxe.WCRemAccessErr {
		t.Fatalf("write past the MR: %+v", wcs[3])
	}
	if string(p.bufB[100:108]) != "write me" || string(p.bufA[200:208]) != "write me" {
		t.Fatalf("B %q A %q", p.bufB[100:108], p.bufA[200:208])
	}
	if wc := poll(t, p.cqB, 1)[0]; wc.Opcode != rxe.WCRecvRDMAWithImm || wc.Imm != 9 || wc.WRID != 50 || wc.ByteLen != 3 {
		t.Fatalf("%+v", wc)
	}
}

func TestDeregisteredKey(t *testing.T) {
	p := newPair(t, false)
	if err := p.b.User.PostRecv([]rxe.RecvWR{{ID: 1, SGEs: []rxe.SGE{{Addr: p.addrB, Length: 64, LKey: p.keyB}}}}); err != nil {
		t.Fatal(err)
	}
	p.dev.Deregister(p.keyA)
	if err := p.a.User.PostSend([]rxe.SendWR{{ID: 2, Opcode: rxe.OpSend, SGEs: []rxe.SGE{{Addr: p.addrA, Length: 8, LKey: p.keyA}}}}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, p.cqA, 1)[0]; wc.WRID != 2 || wc.Status != rxe.WCLocProtErr {
		t.Fatalf("%+v", wc)
	}
}
