//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
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
		ah, err := qp.NewAH(c.PD(), qp.AHParams{DGID: d.GRH.SGID, SGID: gid})
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
		if err != nil || ev.Type != uverbs.CMEventDisconnected {
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
