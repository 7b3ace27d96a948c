//go:build integration

package integration

import (
	"errors"
	"maps"
	"runtime"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// everything is one of each object a Context can own.
type everything struct {
	pd  *uverbs.PD
	buf *uverbs.Buffer
	mr  *uverbs.MR
	ch  *cq.Channel
	cq  *cq.CQ
	qp  *qp.QP
}

// makeEverything creates a PD, a buffer with an MR, a completion channel, a
// CQ on it and an RC QP (in INIT, a receive posted) under ctx.
func makeEverything(t *testing.T, ctx *uverbs.Context) everything {
	t.Helper()
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := uverbs.NewBuffer(1<<16, uverbs.BufferOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := cq.NewChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, 64, ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	q, err := qp.New(pd, qp.Spec{Type: qp.RC, SendCQ: c, RecvCQ: c})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.ToInit(qp.InitParams{}); err != nil {
		t.Fatal(err)
	}
	recv := qp.RecvWR{ID: 1, SGEs: []uverbs.SGE{{Addr: mr.Addr(), Length: 64, LKey: mr.LKey()}}}
	if err := q.PostRecv([]qp.RecvWR{recv}); err != nil {
		t.Fatal(err)
	}
	return everything{pd: pd, buf: buf, mr: mr, ch: ch, cq: c, qp: q}
}

// Ownership proof (a): a context with a PD, an MR, a CQ on a completion
// channel and a QP, all dropped without Close. Once the garbage collector
// has run their cleanups the process holds no uverbs fd or ring mapping and
// no extra fd at all, and the kernel's own resource counts for the device
// are back where they started: nothing is leaked in the kernel either.
func TestOwnershipDroppedObjectsAreReleased(t *testing.T) {
	name := devices(t, 1)[0]
	d, err := uverbs.DeviceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	before, kernBefore := uvCount(t), rdmaResources(t, name)
	func() {
		ctx, err := uverbs.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		_ = makeEverything(t, ctx)
		during := rdmaResources(t, name)
		for _, res := range []string{"pd", "cq", "qp", "mr"} {
			if during[res] <= kernBefore[res] {
				t.Fatalf("kernel counts %s %d with the objects alive, %d before: the check would prove nothing", res, during[res], kernBefore[res])
			}
		}
		if got := uvCount(t); got.ringMaps <= before.ringMaps {
			t.Fatalf("no ring mapping while the CQ and QP are alive: %+v", got)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		now, kern := uvCount(t), rdmaResources(t, name)
		if now == before && maps.Equal(kern, kernBefore) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after dropping everything: process %+v (was %+v), kernel %v (was %v)", now, before, kern, kernBefore)
		}
		time.Sleep(20 * time.Millisecond)
	}
	claimLeaks(t, "uverbs.Context command fd", "uverbs.PD", "uverbs.MR", "uverbs.CQ", "uverbs.QP", "rxe ring mapping", "uverbs.Buffer", "cq.Channel")
}

// Ownership proof (b): the same objects, kept by the caller, and only
// Context.Close called. At once (no garbage collection needed) the process
// holds no uverbs fd or ring mapping, the kernel's counts are back, and the
// forgotten objects say ErrClosed instead of touching unmapped rings.
func TestOwnershipContextCloseReleasesChildren(t *testing.T) {
	name := devices(t, 1)[0]
	d, err := uverbs.DeviceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	kernBefore := rdmaResources(t, name)
	ctx, err := uverbs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	all := makeEverything(t, ctx)
	if fds, maps := uverbsHeld(); len(maps) == 0 || len(fds) < 3 {
		t.Fatalf("with everything alive: fds %v, mappings %v", fds, maps)
	}
	if err := ctx.Close(); err != nil {
		t.Fatalf("Context.Close with live children: %v", err)
	}
	if fds, maps := uverbsHeld(); len(fds)+len(maps) != 0 {
		t.Fatalf("after Context.Close: uverbs fds %v, mappings %v", fds, maps)
	}
	if kern := rdmaResources(t, name); !maps.Equal(kern, kernBefore) {
		t.Fatalf("kernel counts after Context.Close %v, before %v", kern, kernBefore)
	}
	wc := make([]cq.WC, 4)
	if _, err := all.cq.Poll(wc); err == nil {
		t.Fatal("Poll on a CQ of a closed Context succeeded")
	}
	recv := qp.RecvWR{ID: 2, SGEs: []uverbs.SGE{{Addr: all.mr.Addr(), Length: 64, LKey: all.mr.LKey()}}}
	if err := all.qp.PostRecv([]qp.RecvWR{recv}); !errors.Is(err, qp.ErrClosed) {
		t.Fatalf("PostRecv on a QP of a closed Context: %v, want ErrClosed", err)
	}
	// Closing them afterwards is harmless; the buffer is free again.
	for what, err := range map[string]error{
		"qp": all.qp.Close(), "cq": all.cq.Close(), "channel": all.ch.Close(),
		"mr": all.mr.Close(), "pd": all.pd.Close(), "buffer": all.buf.Close(),
	} {
		if err != nil {
			t.Errorf("%s.Close after Context.Close: %v", what, err)
		}
	}
}
