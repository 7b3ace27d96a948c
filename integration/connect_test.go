//go:build integration

package integration

import (
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// connectEnd is one side for TestQPConnect: everything it made is released
// by its Context's Close alone (the ownership model under test too).
type connectEnd struct {
	ctx  *uverbs.Context
	buf  *uverbs.Buffer
	mr   *uverbs.MR
	cq   *cq.CQ
	qp   *qp.QP
	gid  uverbs.GIDEntry
	port uverbs.PortAttr
}

func newConnectEnd(t *testing.T, name string, i int) *connectEnd {
	t.Helper()
	e := &connectEnd{ctx: uvOpen(t, name)}
	_, gid := uvExpect(i)
	var err error
	if e.gid, err = e.ctx.FindGID(1, netip.AddrFrom4([4]byte(gid.To4()))); err != nil {
		t.Fatal(err)
	}
	if e.port, err = e.ctx.QueryPort(1); err != nil {
		t.Fatal(err)
	}
	pd, err := e.ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if e.buf, err = uverbs.NewBuffer(4096, uverbs.BufferOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The Context's Close alone releases the PD, MR, CQ and QP; the
		// buffer is the caller's and is free once the MR is gone.
		if err := e.ctx.Close(); err != nil {
			t.Error(err)
		}
		if err := e.buf.Close(); err != nil {
			t.Errorf("buffer after Context.Close: %v", err)
		}
	})
	if e.mr, err = pd.RegisterMR(e.buf, uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = cq.New(e.ctx, 16, nil); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = qp.New(pd, qp.InitAttr{Type: qp.RC, SendCQ: e.cq, RecvCQ: e.cq}); err != nil {
		t.Fatal(err)
	}
	return e
}

// Two RC QPs on rxe0 and rxe1 connected with one Connect call each, from
// peer records that went through the pingpong text format, exchange a
// SEND_WITH_IMM; the receive was posted in INIT, before Connect.
func TestQPConnect(t *testing.T) {
	names := devices(t, 2)
	a, b := newConnectEnd(t, names[0], 0), newConnectEnd(t, names[1], 1)
	if err := b.qp.ToInit(qp.InitParams{}); err != nil {
		t.Fatal(err)
	}
	rsge, err := b.mr.SGE(0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.qp.PostRecv([]qp.RecvWR{{ID: 9, SGEs: []uverbs.SGE{rsge}}}); err != nil {
		t.Fatal(err)
	}
	record := func(e *connectEnd, psn uint32) qp.Peer {
		text, err := qp.Peer{QPN: e.qp.Num(), PSN: psn, GID: e.gid.GID}.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var p qp.Peer
		if err := p.UnmarshalText(text); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const psnA, psnB = 0x123456, 0xabcdef
	if err := a.qp.Connect(record(b, psnB), qp.ConnectOptions{SGIDIndex: uint8(a.gid.Index), PathMTU: a.port.ActiveMTU, SendPSN: psnA}); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Connect(record(a, psnA), qp.ConnectOptions{SGIDIndex: uint8(b.gid.Index), PathMTU: b.port.ActiveMTU, SendPSN: psnB}); err != nil {
		t.Fatal(err)
	}
	if a.qp.State() != qp.RTS || b.qp.State() != qp.RTS {
		t.Fatalf("states after Connect: %v, %v", a.qp.State(), b.qp.State())
	}
	attr, err := a.qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	if attr.MinRNRTimer != 12 || attr.RetryCnt != 6 || attr.RNRRetry != 7 || attr.SQPSN != psnA || attr.DestQPNum != b.qp.Num() {
		t.Fatalf("queried after Connect: min RNR %d, retry %d, RNR retry %d, SQ PSN %#x, dest %d",
			attr.MinRNRTimer, attr.RetryCnt, attr.RNRRetry, attr.SQPSN, attr.DestQPNum)
	}
	msg := "connected in one call"
	copy(a.buf.Bytes(), msg)
	ssge, err := a.mr.SGE(0, len(msg))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend([]qp.SendWR{{ID: 1, Opcode: qp.SendWithImm, Flags: qp.Signaled, Imm: 77, SGEs: []uverbs.SGE{ssge}}}); err != nil {
		t.Fatal(err)
	}
	w := pollOne(t, b.cq)
	if w.Status != cq.Success || w.WRID != 9 || w.Imm != 77 || string(b.buf.Bytes()[:w.ByteLen]) != msg {
		t.Fatalf("receive: %+v, %q", w, b.buf.Bytes()[:w.ByteLen])
	}
	if s := pollOne(t, a.cq); s.Status != cq.Success {
		t.Fatalf("send completion: %+v", s)
	}
}

func pollOne(t *testing.T, c *cq.CQ) cq.WC {
	t.Helper()
	wc := make([]cq.WC, 1)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		n, err := c.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
	}
	t.Fatal("no completion in 10 s")
	return cq.WC{}
}
