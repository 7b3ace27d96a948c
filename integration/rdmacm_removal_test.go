//go:build integration

package integration

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/integration/rxetest"
	"github.com/pureverbs/pureverbs/qp/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
)

// rdma link delete of the device under a live connection: the kernel's
// CM (rdma_cm loads after ib_uverbs, so it is told first) reports
// DEVICE_REMOVAL to the connection's owner, whose WaitEvent flushes the
// QP; the delete itself then waits in ib_uverbs for the device's contexts
// to close, and completes once the Conn's Close let go of the last one.
func TestCMDeviceRemoval(t *testing.T) {
	p := rxetest.Veth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a, b := netip.MustParseAddr(p.A.Addr.IP.String()), netip.MustParseAddr(p.B.Addr.IP.String())
	addr := netip.AddrPortFrom(b, 7686).String()
	l, err := rdmacm.Listen(ctx, addr, rdmacm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan *rdmacm.Conn, 1)
	go func() {
		c, _ := l.Accept(ctx)
		served <- c
	}()
	var m *cmMessages
	c := dialRetry(t, ctx, addr, withMessages(t, rdmacm.Options{Source: a}, &m, 4, 64))
	closed := false
	defer func() {
		if !closed {
			m.close()
			c.Close()
		}
	}()
	if s := <-served; s != nil {
		defer s.Close()
	} else {
		t.Fatal("the listener accepted nothing")
	}

	deleted := make(chan error, 1)
	start := time.Now()
	go func() { deleted <- netlink.RdmaLinkDel(p.A.RDMA) }()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	ev, err := c.WaitEvent(wctx)
	if err != nil || ev.Type != rdmacm.EventDeviceRemoval {
		t.Fatalf("after rdma link delete %s: %v, %v; want DEVICE_REMOVAL", p.A.RDMA, ev.Type, err)
	}
	t.Logf("DEVICE_REMOVAL %v after the delete began", time.Since(start).Round(time.Millisecond))
	if flushed := countFlushed(t, c.CQ(), 4); flushed != 4 {
		t.Errorf("%d of 4 posted receives flushed after DEVICE_REMOVAL", flushed)
	}
	select {
	case err := <-deleted:
		t.Fatalf("rdma link delete returned (%v) while the Conn still holds the device", err)
	default:
	}
	m.close()
	if err := c.Close(); err != nil {
		t.Logf("Close after DEVICE_REMOVAL: %v", err)
	}
	closed = true
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("rdma link delete: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("rdma link delete still blocked 30 s after the Conn's Close")
	}
}

// countFlushed polls cq for up to 10 s until want completions with
// WR_FLUSH_ERR arrived, and returns how many did.
func countFlushed(t *testing.T, q *cq.CQ, want int) int {
	t.Helper()
	wc := make([]cq.WC, 8)
	flushed := 0
	for deadline := time.Now().Add(10 * time.Second); flushed < want && time.Now().Before(deadline); {
		n, err := q.Poll(wc)
		if err != nil && !errors.Is(err, uverbs.ErrDeviceRemoved) { // an empty poll once the Context saw the removal
			t.Fatal(err)
		}
		for _, w := range wc[:n] {
			if w.Status == cq.WRFlushErr {
				flushed++
			}
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return flushed
}
