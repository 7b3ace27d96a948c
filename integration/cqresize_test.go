//go:build integration

package integration

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// sendN posts n signaled SENDs of size bytes from e (IDs from first on) and
// waits for their completions.
func sendN(t *testing.T, e *qpEnd, q *qp.QP, first, n, size int) {
	t.Helper()
	for i := range n {
		if err := q.PostSend([]qp.SendWR{{ID: uint64(first + i), Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(e, 0, size)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range pollWait(t, e.cq, make([]cq.WC, n), n, 20*time.Second) {
		if w.Status != cq.Success {
			t.Fatalf("send completion %+v", w)
		}
	}
}

// Resizing a CQ with completions pending keeps them: grown, then shrunk to
// just above what is pending, every completion comes out once, in order;
// a size below what is pending is refused and changes nothing.
func TestCQResizeKeepsPending(t *testing.T) {
	a, b := pair(t, false, endOpts{cap: qp.Cap{MaxRecvWR: 256, MaxSendWR: 256}})
	const n = 40
	for i := range n {
		if err := b.qp.PostRecv([]qp.RecvWR{{ID: uint64(i), SGEs: []uverbs.SGE{sge(b, 0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	before := uverbsMappings(t)
	cqe0 := b.cq.CQE()
	sendN(t, a, a.qp, 0, n, 64)
	time.Sleep(100 * time.Millisecond) // the receive completions follow the ACKs
	// Consume a few first, so that the old ring's consumer index is not
	// where the new ring's starts.
	const early = 7
	for i, w := range pollWait(t, b.cq, make([]cq.WC, early), early, 10*time.Second) {
		if w.WRID != uint64(i) {
			t.Fatalf("completion %d before resizing: %+v", i, w)
		}
	}
	if err := b.cq.Resize(1000); err != nil {
		t.Fatal(err)
	}
	cqe1 := b.cq.CQE()
	if err := b.cq.Resize(10); !errors.Is(err, unix.EINVAL) {
		t.Errorf("resize to 10 with %d pending: %v, want EINVAL", n, err)
	}
	if err := b.cq.Resize(n - early + 1); err != nil {
		t.Fatal(err)
	}
	cqe2 := b.cq.CQE()
	t.Logf("CQE %d -> Resize(1000) %d -> Resize(%d) %d", cqe0, cqe1, n-early+1, cqe2)
	if cqe1 < 1000 || cqe2 < n-early+1 || cqe2 >= cqe1 {
		t.Errorf("CQE %d -> %d -> %d", cqe0, cqe1, cqe2)
	}
	if got := uverbsMappings(t); got != before {
		t.Errorf("%d uverbs mappings after two resizes, %d before: an old ring stayed mapped", got, before)
	}
	wc := pollWait(t, b.cq, make([]cq.WC, n-early), n-early, 10*time.Second)
	for i, w := range wc {
		if w.WRID != uint64(early+i) || w.Status != cq.Success || w.Opcode != cq.OpRecv {
			t.Fatalf("completion %d after resizing: %+v", i, w)
		}
	}
	quiet(t, b.cq, "after the pending completions")
}

// A poller running while the CQ is resized back and forth under traffic
// sees every completion exactly once, in order.
func TestCQResizeUnderPolling(t *testing.T) {
	a, b := pair(t, false, endOpts{cap: qp.Cap{MaxRecvWR: 512, MaxSendWR: 64}})
	const n = 400
	for i := range n {
		if err := b.qp.PostRecv([]qp.RecvWR{{ID: uint64(i), SGEs: []uverbs.SGE{sge(b, 0, 32)}}}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg  sync.WaitGroup
		got []uint64
		bad []cq.WC
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		wc := make([]cq.WC, 16)
		for len(got) < n {
			k, err := b.cq.Poll(wc)
			if err != nil {
				t.Error(err)
				return
			}
			for _, w := range wc[:k] {
				if w.Status != cq.Success {
					bad = append(bad, w)
				}
				got = append(got, w.WRID)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	resizes := 0
	for i := 0; i < n; i += 20 {
		sendN(t, a, a.qp, i, 20, 32)
		if err := b.cq.Resize([]int{600, 300}[resizes%2]); err != nil {
			t.Fatalf("resize %d: %v", resizes, err)
		}
		resizes++
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		close(stop)
		<-done
	}
	if len(bad) != 0 {
		t.Errorf("failed completions: %+v", bad)
	}
	if len(got) != n {
		t.Fatalf("%d completions of %d through %d resizes", len(got), n, resizes)
	}
	for i, id := range got {
		if id != uint64(i) {
			t.Fatalf("completion %d has WRID %d: lost or repeated across a resize", i, id)
		}
	}
	t.Logf("%d completions, %d resizes under polling", n, resizes)
}

// Overrunning a CQ: rxe queues an async CQ_ERR event naming the CQ; Poll
// returns the completions that fit and no more; the receiving QP is moved
// to the error state (the responder cannot complete).
func TestCQOverrun(t *testing.T) {
	a, b := pair(t, false, endOpts{})
	small, err := cq.New(b.ctx, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "small CQ", small.Close()) })
	rq, err := qp.New(b.pd, qp.Spec{Type: qp.RC, SendCQ: b.cq, RecvCQ: small})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "QP", rq.Close()) })
	sq, err := qp.New(a.pd, qp.Spec{Type: qp.RC, SendCQ: a.cq, RecvCQ: a.cq})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "QP", sq.Close()) })
	capacity := small.CQE()
	n := capacity + 3
	if err := rq.ToInit(qp.InitParams{Access: uverbs.AccessRemoteWrite}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := rq.PostRecv([]qp.RecvWR{{ID: uint64(i), SGEs: []uverbs.SGE{sge(b, 0, 16)}}}); err != nil {
			t.Fatal(err)
		}
	}
	connectOne(t, a, sq, b, rq)
	for i := range n {
		if err := sq.PostSend([]qp.SendWR{{ID: uint64(i), Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(a, 0, 16)}}}); err != nil {
			t.Fatal(err)
		}
	}
	ev, err := waitEvent(t, b.ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("no async event after %d completions into a CQ of %d: %v", n, capacity, err)
	}
	if ev.Type != uverbs.EventCQErr || ev.Object != small {
		t.Fatalf("event %v (object %v), want CQ error on %p", ev, ev.Object, small)
	}
	t.Logf("CQ of %d entries, %d completions: %v", capacity, n, ev)
	time.Sleep(100 * time.Millisecond)
	wc := make([]cq.WC, n+4)
	k, err := small.Poll(wc)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range wc[:k] {
		if w.WRID != uint64(i) || w.Status != cq.Success {
			t.Errorf("completion %d of the overrun CQ: %+v", i, w)
		}
	}
	if k != capacity {
		t.Errorf("Poll after the overrun returned %d completions, want the CQ's %d", k, capacity)
	}
	attr, err := rq.Query()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Poll: %d completions; receiving QP now %v", k, attr.State)
	if attr.State != qp.StateError {
		t.Errorf("receiving QP in %v after the overrun, want ERR", attr.State)
	}
}
