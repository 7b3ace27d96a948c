//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// udaddy's datagram: SEND_WITH_IMM carrying the sender's QPN as the
// immediate (the C server builds its reply address from it and the GRH).
const udaddyCount, udaddySize = 10, 100

// The Go UD client (SIDR over the UDP port space) against rdma-core's
// udaddy server, then the Go UD listener against udaddy's client: the
// remote QPN and Q_Key from the SIDR reply, count datagrams each way.
func TestCMUdaddy(t *testing.T) {
	devices(t, 2)
	t.Run("CServer", func(t *testing.T) {
		srv := startPeer(t, 60*time.Second, "udaddy", "-b", "10.99.0.1", "-C", "10", "-S", "100")
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		var m *cmMessages
		var c *rdmacm.Conn
		for {
			var err error
			c, err = rdmacm.DialUD(ctx, "10.99.0.1:7174", withMessages(t, rdmacm.Options{Source: cmAddr1}, &m, udaddyCount, udaddySize+qp.GRHLen))
			if err == nil {
				break
			}
			if m != nil {
				m.close()
				m = nil
			}
			if ctx.Err() != nil {
				t.Fatalf("dial UD: %v", err)
			}
			time.Sleep(100 * time.Millisecond) // udaddy not listening yet (SIDR REP with an error status)
		}
		defer c.Close()
		defer m.close()
		r := c.Remote()
		if r.QPN == 0 || r.QKey != c.QKey() || r.AH == nil || c.QKey() != 0x01234567 {
			t.Fatalf("SIDR reply: remote %+v, local Q_Key %#x", r, c.QKey())
		}
		sge, _ := m.mr.SGE(0, udaddySize)
		for i := range udaddyCount {
			if err := c.QP().PostSend([]qp.SendWR{{ID: uint64(i), Opcode: qp.SendWithImm, Flags: qp.Signaled, Imm: c.QP().Num(),
				SGEs: []uverbs.SGE{sge}, AH: r.AH, RemoteQPN: r.QPN, RemoteQKey: r.QKey}}); err != nil {
				t.Fatal(err)
			}
		}
		pollN(t, c.CQ(), udaddyCount, udaddyCount, 30*time.Second)
		out := srv.wait(t)
		if !strings.Contains(out, "data transfers complete") {
			t.Errorf("udaddy server:\n%s", out)
		}
	})
	t.Run("CClient", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		// The receives go up before the SIDR REP: udaddy sends as soon
		// as it has it, and UD drops what finds no receive.
		var m *cmMessages
		l, err := rdmacm.ListenUD(ctx, "10.99.0.1:7174", withMessages(t, rdmacm.Options{}, &m, udaddyCount, udaddySize+qp.GRHLen))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cli := startPeer(t, 60*time.Second, "udaddy", "-s", "10.99.0.1", "-b", "10.99.0.2", "-C", "10", "-S", "100")
		c, err := l.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		defer m.close()
		wcs := pollN(t, c.CQ(), 0, udaddyCount, 30*time.Second)
		d, err := qp.ParseDatagram(&wcs[0], m.buf.Bytes()[int(wcs[0].WRID)*m.size:][:m.size])
		if err != nil {
			t.Fatal(err)
		}
		if d.GRH.Src() != cmAddr1 || wcs[0].Imm != d.SrcQP {
			t.Errorf("datagram from %v, QPN %#x, immediate %#x", d.GRH.Src(), d.SrcQP, wcs[0].Imm)
		}
		gid, err := c.Context().FindGID(1, cmAddr0)
		if err != nil {
			t.Fatal(err)
		}
		ah, err := qp.NewAH(c.PD(), qp.AHSpec{DGID: d.GRH.SGID, SGID: gid})
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Close()
		sge, _ := m.mr.SGE(0, udaddySize)
		for i := range udaddyCount {
			if err := c.QP().PostSend([]qp.SendWR{{ID: uint64(i), Opcode: qp.SendWithImm, Flags: qp.Signaled, Imm: c.QP().Num(),
				SGEs: []uverbs.SGE{sge}, AH: ah, RemoteQPN: d.SrcQP, RemoteQKey: c.QKey()}}); err != nil {
				t.Fatal(err)
			}
		}
		pollN(t, c.CQ(), udaddyCount, 0, 30*time.Second)
		if out := cli.wait(t); !strings.Contains(out, "data transfers complete") {
			t.Errorf("udaddy client:\n%s", out)
		}
	})
}

// rdma_server / rdma_client (rdma_getaddrinfo, rdma_create_ep, the sync
// verbs wrappers, inline sends) against the library, both ways: 16 bytes
// each way. rdma_client cannot bind a source, so the kernel routes it to
// the local address from rxe0 itself.
func TestCMRdmaServerClient(t *testing.T) {
	devices(t, 2)
	exchange := func(t *testing.T, c *rdmacm.Conn, m *cmMessages, sendFirst bool) {
		if sendFirst {
			m.postSends(t, c.QP(), 1)
			pollN(t, c.CQ(), 1, 1, 20*time.Second)
			return
		}
		pollN(t, c.CQ(), 0, 1, 20*time.Second)
		m.postSends(t, c.QP(), 1)
		pollN(t, c.CQ(), 1, 0, 20*time.Second)
	}
	// The C side disconnects first and, being synchronous, waits for the
	// DREP: WaitEvent sees the DISCONNECTED and answers it.
	disconnected := func(t *testing.T, ctx context.Context, c *rdmacm.Conn) {
		ev, err := c.WaitEvent(ctx)
		if err != nil || ev.Type != rdmacm.EventDisconnected {
			t.Fatalf("event %v, %v; want DISCONNECTED", ev.Type, err)
		}
	}
	t.Run("CServer", func(t *testing.T) {
		srv := startPeer(t, 60*time.Second, "rdma_server", "-s", "10.99.0.1", "-p", "7520")
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		var m *cmMessages
		c := dialRetry(t, ctx, "10.99.0.1:7520", withMessages(t, rdmacm.Options{Source: cmAddr1}, &m, 1, 16))
		defer c.Close()
		defer m.close()
		exchange(t, c, m, true)
		disconnected(t, ctx, c)
		if out := srv.wait(t); !strings.Contains(out, "rdma_server: end 0") {
			t.Errorf("rdma_server:\n%s", out)
		}
	})
	t.Run("CClient", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		var m *cmMessages
		l, err := rdmacm.Listen(ctx, "10.99.0.1:7521", withMessages(t, rdmacm.Options{}, &m, 1, 16))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cli := startPeer(t, 60*time.Second, "rdma_client", "-s", "10.99.0.1", "-p", "7521")
		c, err := l.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		defer m.close()
		exchange(t, c, m, false)
		disconnected(t, ctx, c)
		if out := cli.wait(t); !strings.Contains(out, "rdma_client: end 0") {
			t.Errorf("rdma_client:\n%s", out)
		}
	})
}

// udOwnQP is a UD QP a test builds itself on a CM device context: PD, one
// CQ, a registered buffer of two slots (send at 0, receive at 256).
type udOwnQP struct {
	pd  *uverbs.PD
	cq  *cq.CQ
	q   *qp.QP
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

func newUDOwnQP(t *testing.T, on *uverbs.Context) *udOwnQP {
	t.Helper()
	u := &udOwnQP{}
	var err error
	if u.pd, err = on.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if u.cq, err = cq.New(on, 8, nil); err != nil {
		t.Fatal(err)
	}
	if u.q, err = qp.New(u.pd, qp.Spec{Type: qp.UD, SendCQ: u.cq, RecvCQ: u.cq}); err != nil {
		t.Fatal(err)
	}
	if u.buf, err = uverbs.NewBuffer(512, uverbs.BufferOptions{}); err != nil {
		t.Fatal(err)
	}
	if u.mr, err = u.pd.RegisterMR(u.buf, uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	return u
}

// closeAll runs the closes in order, failing on any error.
func closeAll(t *testing.T, closes ...func() error) {
	t.Helper()
	for _, f := range closes {
		if err := f(); err != nil {
			t.Error(err)
		}
	}
}

// A caller's UD QP on both sides: ResolveUD and Route.ConnectQP on the
// active side (the SIDR request with the caller's QPN, the reply's
// address handle made in that QP's PD), Request.AcceptQP on a ListenUD
// listener. A datagram goes from the active QP to the passive one, which
// sees the active QP as its source (the SIDR request names no QP). A route of the UDP port space
// refuses an RC QP and stays usable.
func TestCMUDConnectQP(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	l, err := rdmacm.ListenUD(ctx, "10.99.0.1:7180", rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rt, err := rdmacm.ResolveUD(ctx, "10.99.0.1:7180", rdmacm.Options{Source: cmAddr1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	u := newUDOwnQP(t, rt.Context())
	rcq, err := qp.New(u.pd, qp.Spec{Type: qp.RC, SendCQ: u.cq, RecvCQ: u.cq})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ConnectQP(ctx, rcq, rdmacm.Options{}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("ConnectQP of an RC QP on a UD route: %v, want EINVAL", err)
	}
	rcq.Close()
	type connected struct {
		c   *rdmacm.Conn
		err error
	}
	done := make(chan connected, 1)
	go func() {
		c, err := rt.ConnectQP(ctx, u.q, rdmacm.Options{PrivateData: []byte("own UD QP")})
		done <- connected{c, err}
	}()
	r, err := l.Request(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pu := newUDOwnQP(t, r.Context())
	pc, err := r.AcceptQP(ctx, pu.q, rdmacm.Options{Setup: func(c *rdmacm.Conn) error {
		sge, err := pu.mr.SGE(256, qp.GRHLen+64)
		if err != nil {
			return err
		}
		return c.QP().PostRecv([]qp.RecvWR{{ID: 7, SGEs: []uverbs.SGE{sge}}})
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The passive Conn holds no address handle: its QP's objects go
	// first, then the Conn (and with it rxe0's context).
	defer closeAll(t, pu.q.Close, pu.cq.Close, pu.mr.Close, pu.pd.Close, pc.Close, pu.buf.Close)
	a := <-done
	if a.err != nil {
		t.Fatalf("connect: %v", a.err)
	}
	c := a.c
	// The active Conn's address handle is in the caller's PD: the Conn
	// closes before it.
	defer closeAll(t, u.q.Close, u.cq.Close, u.mr.Close, c.Close, u.pd.Close, u.buf.Close)
	rem := c.Remote()
	if c.QP() != u.q || u.q.PD() != u.pd || u.q.State() != qp.StateRTS || c.PD() != nil ||
		rem.QPN != pu.q.Num() || rem.QKey != 0x01234567 || rem.AH == nil {
		t.Fatalf("active side: QP %p (own %p) in %v, PD %p (own %p), Conn.PD %p, remote %+v; passive QPN %#x",
			c.QP(), u.q, u.q.State(), u.q.PD(), u.pd, c.PD(), rem, pu.q.Num())
	}
	// A SIDR request carries no QPN: the passive side learns the active
	// QP from its datagrams.
	if p := pc.PrivateData(); !bytes.HasPrefix(p, []byte("own UD QP")) {
		t.Fatalf("passive side's private data %q", p)
	}
	copy(u.buf.Bytes(), "a datagram from a caller's QP")
	sge, _ := u.mr.SGE(0, 64)
	if err := u.q.PostSend([]qp.SendWR{{ID: 1, Opcode: qp.SendWithImm, Flags: qp.Signaled, Imm: 0xfeed,
		SGEs: []uverbs.SGE{sge}, AH: rem.AH, RemoteQPN: rem.QPN, RemoteQKey: rem.QKey}}); err != nil {
		t.Fatal(err)
	}
	pollN(t, u.cq, 1, 0, 20*time.Second)
	wcs := pollN(t, pu.cq, 0, 1, 20*time.Second)
	d, err := qp.ParseDatagram(&wcs[0], pu.buf.Bytes()[256:])
	if err != nil {
		t.Fatal(err)
	}
	if d.SrcQP != u.q.Num() || wcs[0].Imm != 0xfeed || d.GRH.Src() != cmAddr1 || !bytes.HasPrefix(d.Payload, []byte("a datagram from a caller's QP")) {
		t.Fatalf("datagram from QPN %#x (%v), immediate %#x, payload %q", d.SrcQP, d.GRH.Src(), wcs[0].Imm, d.Payload)
	}
}
