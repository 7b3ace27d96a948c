//go:build integration

package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/integration/rxetest"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
)

func openDev(t *testing.T, name string) *uverbs.Context {
	t.Helper()
	d, err := uverbs.DeviceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := uverbs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	return ctx
}

func setLink(t *testing.T, netdev string, up bool) {
	t.Helper()
	l, err := netlink.LinkByName(netdev)
	if err != nil {
		t.Fatal(err)
	}
	if up {
		err = netlink.LinkSetUp(l)
	} else {
		err = netlink.LinkSetDown(l)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// The netdev under an rxe device going down and up raises PORT_ERR and
// PORT_ACTIVE for port 1, and the port's state follows.
func TestAsyncPortEvents(t *testing.T) {
	p := rxetest.Veth(t)
	ctx := openDev(t, p.A.RDMA)
	defer func() { closeOK(t, "context", ctx.Close()) }()
	setLink(t, p.A.Netdev, false)
	ev, err := waitEvent(t, ctx, 10*time.Second)
	if err != nil || ev.Type != uverbs.EventPortErr || ev.Port != 1 || ev.Type.Kind() != uverbs.KindPort {
		t.Fatalf("link down: %v, %v; want port error on port 1", ev, err)
	}
	if pa, err := ctx.QueryPort(1); err != nil || pa.State == uverbs.PortActive {
		t.Errorf("port after link down: %+v, %v", pa.State, err)
	}
	setLink(t, p.A.Netdev, true)
	ev, err = waitEvent(t, ctx, 10*time.Second)
	if err != nil || ev.Type != uverbs.EventPortActive || ev.Port != 1 {
		t.Fatalf("link up: %v, %v; want port active on port 1", ev, err)
	}
	t.Logf("down: port error, up: %v", ev)
}

// Moving an RTS QP to SQD raises SQ_DRAINED once its send queue is empty,
// naming the QP.
func TestAsyncSQDrained(t *testing.T) {
	a, b := pair(t, false, endOpts{})
	for i := range 4 {
		if err := b.qp.PostRecv([]qp.RecvWR{{ID: uint64(i), SGEs: []uverbs.SGE{sge(b, 0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	sendN(t, a, a.qp, 0, 4, 64)
	if err := a.qp.Modify(&qp.Attr{State: qp.StateSQD, EnSQDAsyncNotify: true}, qp.AttrState|qp.AttrEnSQDAsyncNotify); err != nil {
		t.Fatal(err)
	}
	ev, err := waitEvent(t, a.ctx, 10*time.Second)
	if err != nil || ev.Type != uverbs.EventSQDrained || ev.Object != a.qp {
		t.Fatalf("after SQD: %v, %v; want SQ drained on QP %#x", ev, err, a.qp.Num())
	}
	t.Logf("%v", ev)
}

// A QP on an SRQ moved to the error state: 6.12's rxe raises
// LAST_WQE_REACHED for it; 6.1's raises nothing.
func TestAsyncLastWQEReached(t *testing.T) {
	r := newSRQRig(t, 2, qp.SRQAttr{MaxWR: 16})
	r.postSRQ(t, 0, 4, 64)
	r.send(t, 0, 64, 1)
	pollWait(t, r.rx.cq, make([]cq.WC, 1), 1, 10*time.Second)
	if err := r.rxQPs[1].ToError(); err != nil {
		t.Fatal(err)
	}
	ev, err := waitEvent(t, r.rx.ctx, 3*time.Second)
	switch {
	case kernelAtLeast(t, 6, 12):
		if err != nil || ev.Type != uverbs.EventQPLastWQEReached || ev.Object != r.rxQPs[1] {
			t.Fatalf("QP on SRQ to ERR: %v, %v; want last WQE reached on QP %#x", ev, err, r.rxQPs[1].Num())
		}
		t.Logf("%v", ev)
	case err == nil:
		t.Fatalf("6.1: unexpected event %v", ev)
	case !errors.Is(err, context.DeadlineExceeded):
		t.Fatal(err)
	default:
		t.Log("6.1: no last-WQE-reached event, as expected")
	}
	// The SRQ and the other QP keep working.
	r.send(t, 0, 64, 2)
	pollWait(t, r.rx.cq, make([]cq.WC, 1), 1, 10*time.Second)
}

// A wait for an async event ends when its context is cancelled.
func TestAsyncWaitCancelled(t *testing.T) {
	ctx := openDev(t, devices(t, 1)[0])
	defer func() { closeOK(t, "context", ctx.Close()) }()
	c, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	if _, err := ctx.WaitAsyncEvent(c); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitAsyncEvent = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancellation took %v", d)
	}
}

// rxe cannot disassociate its users: `rdma link delete` blocks until every
// uverbs fd of the device is closed, and meanwhile the open context gets no
// device-fatal (or any) event. The delete runs in a goroutine with a
// deadline; closing the context lets it finish.
func TestAsyncLinkDeleteWaitsForContext(t *testing.T) {
	p := rxetest.Veth(t)
	ctx := openDev(t, p.A.RDMA)
	closed := false
	defer func() {
		if !closed {
			ctx.Close()
		}
	}()
	c, err := cq.New(ctx, 16, nil) // a mapped ring too
	if err != nil {
		t.Fatal(err)
	}
	_ = c
	done := make(chan error, 1)
	go func() { done <- netlink.RdmaLinkDel(p.A.RDMA) }()
	select {
	case err := <-done:
		t.Fatalf("rdma link delete returned at once (%v) with a context open", err)
	case <-time.After(2 * time.Second):
	}
	if ev, err := ctx.ReadAsyncEvent(); err == nil {
		t.Errorf("event during the blocked delete: %v", ev)
	}
	t.Log("rdma link delete blocks while a context is open; no async event")
	if err := ctx.Close(); err != nil {
		t.Errorf("Context.Close while the device is being deleted: %v", err)
	}
	closed = true
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("rdma link delete after Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("rdma link delete still blocked 30 s after the context was closed")
	}
}
