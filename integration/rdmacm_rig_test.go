//go:build integration

package integration

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/qp/rdmacm/ucma"
	"github.com/pureverbs/pureverbs/uverbs"
)

// On the veth topology rxe0 owns 10.99.0.1 and rxe1 10.99.0.2. A CM client
// binds its source explicitly so that it really leaves from the other
// device.
var (
	cmAddr0 = netip.MustParseAddr("10.99.0.1")
	cmAddr1 = netip.MustParseAddr("10.99.0.2")
)

// cmMessages is one connection's message buffers: count slots of size
// bytes, registered on the connection's PD.
type cmMessages struct {
	buf  *uverbs.Buffer
	mr   *uverbs.MR
	size int
}

func newCMMessages(t testing.TB, c *rdmacm.Conn, count, size int) *cmMessages {
	t.Helper()
	buf, err := uverbs.NewBuffer(max(count*size, 1), uverbs.BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := c.PD().RegisterMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		buf.Close()
		t.Fatal(err)
	}
	return &cmMessages{buf: buf, mr: mr, size: size}
}

func (m *cmMessages) close() {
	m.mr.Close()
	m.buf.Close()
}

func (m *cmMessages) sge(t testing.TB, i int) uverbs.SGE {
	s, err := m.mr.SGE(i*m.size, m.size)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withMessages returns o with a Setup that gives the connection count
// message slots of size bytes in *m, each with a receive posted before the
// connection completes. On a retried dial (dialRetry) a rejected attempt's
// slots are closed before the next attempt's are made.
func withMessages(t testing.TB, o rdmacm.Options, m **cmMessages, count, size int) rdmacm.Options {
	o.Setup = func(c *rdmacm.Conn) error {
		if *m != nil {
			(*m).close()
		}
		*m = newCMMessages(t, c, count, size)
		(*m).postRecvs(t, c.QP(), count)
		return nil
	}
	return o
}

// postRecvs posts count receives, one slot each.
func (m *cmMessages) postRecvs(t testing.TB, q *qp.QP, count int) {
	t.Helper()
	for i := range count {
		if err := q.PostRecv([]qp.RecvWR{{ID: uint64(i), SGEs: []uverbs.SGE{m.sge(t, i)}}}); err != nil {
			t.Fatalf("post recv %d: %v", i, err)
		}
	}
}

// postSends posts count signaled SENDs of slot 0.
func (m *cmMessages) postSends(t testing.TB, q *qp.QP, count int) {
	t.Helper()
	for i := range count {
		if err := q.PostSend([]qp.SendWR{{ID: uint64(1000 + i), Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{m.sge(t, 0)}}}); err != nil {
			t.Fatalf("post send %d: %v", i, err)
		}
	}
}

// pollN polls c until sends send completions and recvs receive
// completions arrived, failing on an error status or after limit, and
// returns the receives.
func pollN(t testing.TB, c *cq.CQ, sends, recvs int, limit time.Duration) []cq.WC {
	t.Helper()
	var got []cq.WC
	sent := 0
	wc := make([]cq.WC, 16)
	deadline := time.Now().Add(limit)
	for len(got) < recvs || sent < sends {
		k, err := c.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wc[:k] {
			if w.Status != cq.Success {
				t.Fatalf("completion %+v", w)
			}
			if w.Opcode.IsRecv() {
				got = append(got, w)
			} else {
				sent++
			}
		}
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d send and %d of %d receive completions after %v", sent, sends, len(got), recvs, limit)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	if len(got) > recvs || sent > sends {
		t.Fatalf("%d sends and %d receives completed, want %d and %d", sent, len(got), sends, recvs)
	}
	return got
}

// dialRetry dials until the listener is there: a connect to a port nobody
// listens on is rejected at once (reason 8), so a C server that has not
// yet called rdma_listen is retried. o.Setup runs on every attempt: it
// releases what an earlier, rejected attempt's Setup built.
func dialRetry(t testing.TB, ctx context.Context, addr string, o rdmacm.Options) *rdmacm.Conn {
	t.Helper()
	for {
		c, err := rdmacm.Dial(ctx, addr, o)
		var re *rdmacm.RejectError
		if errors.As(err, &re) && re.Reason == rdmacm.RejectNoListener && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		return c
	}
}

// rawConnect is an active side on the raw layer that sends a REQ for a
// QP that does not exist (qpn) and never answers the REP with an RTU: it
// resolves dst from rxe1's address and connects; the caller reads the
// CONNECT_RESPONSE, or not.
func rawConnect(t *testing.T, ctx context.Context, ch *ucma.Channel, uid uint64, dst netip.AddrPort, qpn uint32) uint32 {
	t.Helper()
	id, err := ch.CreateID(uid, ucma.PortSpaceTCP, uverbs.QPTypeRC)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ResolveAddr(id, netip.AddrPortFrom(cmAddr1, 0), dst, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if ev, err := ch.WaitEvent(ctx); err != nil || ev.Type != ucma.EventAddrResolved {
		t.Fatalf("resolve address: %v, %v", ev.Type, err)
	}
	if err := ch.ResolveRoute(id, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if ev, err := ch.WaitEvent(ctx); err != nil || ev.Type != ucma.EventRouteResolved {
		t.Fatalf("resolve route: %v, %v", ev.Type, err)
	}
	p := ucma.ConnParam{QPNum: qpn, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 6, RNRRetryCount: 7}
	if err := ch.Connect(id, p, ucma.ECE{}); err != nil {
		t.Fatal(err)
	}
	return id
}

// awaitRaw waits up to limit for an event of type want on ch.
func awaitRaw(t *testing.T, ctx context.Context, ch *ucma.Channel, want ucma.EventType, limit time.Duration) ucma.Event {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	ev, err := ch.WaitEvent(wctx)
	if err != nil || ev.Type != want {
		t.Fatalf("waiting for %v: %v (status %d), %v", want, ev.Type, ev.Status, err)
	}
	return ev
}
