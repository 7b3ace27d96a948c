//go:build integration

package integration

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Several QPs share one SRQ: every QP's messages land in the SRQ's
// buffers in posting order, each completion names the QP it arrived on,
// and PostRecv on a QP of the SRQ is refused as the caller's mistake.
func TestSRQSharedByQPs(t *testing.T) {
	const n, size = 4, 256
	r := newSRQRig(t, n, qp.SRQAttr{MaxWR: 64, MaxSGE: 2})
	if err := r.rxQPs[0].PostRecv([]qp.RecvWR{{ID: 1}}); !errors.Is(err, qp.ErrSRQAttached) || errors.Is(err, uverbs.ErrNotSupported) {
		t.Fatalf("PostRecv on a QP of an SRQ = %v, want ErrSRQAttached (a caller's mistake, not ErrNotSupported)", err)
	}
	if c := r.rxQPs[0].Cap(); c.MaxRecvWR != 0 || r.rxQPs[0].SRQ() != r.srq {
		t.Errorf("QP on SRQ: cap %+v, SRQ %p", c, r.rxQPs[0].SRQ())
	}
	a, err := r.srq.Query()
	if err != nil {
		t.Fatal(err)
	}
	maxWR, maxSGE := r.srq.Cap()
	t.Logf("SRQ %#x: asked 64 x 2 SGEs; created %+v, query %+v, posting depth %d, SGEs %d", r.srq.Num(), r.srq.Verbs().Attr(), a, maxWR, maxSGE)
	if a.MaxWR < 64 || a.MaxSGE < 2 || maxWR < 64 || maxSGE < 2 {
		t.Fatalf("SRQ granted %+v (depth %d, %d SGEs), asked 64 x 2", a, maxWR, maxSGE)
	}
	r.postSRQ(t, 0, 3*n, size)
	for round := range 3 {
		for i := range n {
			r.send(t, i, size, byte(1+round*n+i))
		}
	}
	wc := pollWait(t, r.rx.cq, make([]cq.WC, 3*n), 3*n, 10*time.Second)
	perQP := map[uint32]int{}
	for k, w := range wc {
		want := r.rxQPs[k%n].Num()
		if w.Status != cq.Success || w.Opcode != cq.OpRecv || w.ByteLen != size || w.WRID != uint64(k) || w.QPNum != want {
			t.Errorf("completion %d: %+v, want WRID %d on QP %#x", k, w, k, want)
		}
		perQP[w.QPNum]++
		got := r.rx.buf.Bytes()[k*size : (k+1)*size]
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(1 + k)}, size)) {
			t.Errorf("receive %d holds %x...", k, got[:8])
		}
	}
	if len(perQP) != n {
		t.Errorf("completions per QP: %v", perQP)
	}
	one := []qp.RecvWR{{ID: 99, SGEs: []uverbs.SGE{sge(r.rx, 0, 64)}}}
	if allocs := testing.AllocsPerRun(20, func() {
		if err := r.srq.PostRecv(one); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("SRQ PostRecv allocates %v times", allocs)
	}
	quiet(t, r.rx.cq, "after the exchange")
}

// PostRecv on an SRQ is all or nothing: a full queue or a bad request in
// the middle posts none.
func TestSRQPostAllOrNothing(t *testing.T) {
	r := newSRQRig(t, 1, qp.SRQAttr{MaxWR: 8, MaxSGE: 1})
	depth, _ := r.srq.Cap()
	wrs := make([]qp.RecvWR, depth+1)
	for i := range wrs {
		wrs[i] = qp.RecvWR{ID: uint64(i), SGEs: []uverbs.SGE{sge(r.rx, 0, 16)}}
	}
	if err := r.srq.PostRecv(wrs); !errors.Is(err, qp.ErrQueueFull) {
		t.Fatalf("%d receives on a %d-deep SRQ: %v", len(wrs), depth, err)
	}
	bad := []qp.RecvWR{wrs[0], {ID: 7, SGEs: []uverbs.SGE{sge(r.rx, 0, 8), sge(r.rx, 8, 8)}}}
	if err := r.srq.PostRecv(bad); !errors.Is(err, qp.ErrTooManySGEs) {
		t.Fatalf("two SGEs on a 1-SGE SRQ: %v", err)
	}
	// Nothing was posted: the first send finds no receive (RNR), until
	// one is posted.
	if err := r.txQPs[0].PostSend([]qp.SendWR{{ID: 1, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(r.tx, 0, 16)}}}); err != nil {
		t.Fatal(err)
	}
	quiet(t, r.rx.cq, "no receive posted")
	if err := r.srq.PostRecv(wrs[5:6]); err != nil {
		t.Fatal(err)
	}
	wc := pollWait(t, r.rx.cq, make([]cq.WC, 1), 1, 10*time.Second)
	if wc[0].WRID != 5 || wc[0].Status != cq.Success {
		t.Fatalf("completion %+v, want WRID 5", wc[0])
	}
	pollWait(t, r.tx.cq, make([]cq.WC, 1), 1, 10*time.Second)
}

// The limit event: armed at 4 with 8 receives posted, it fires once the
// fifth is taken (3 left < 4), names the SRQ, and disarms (query shows
// limit 0; further receives raise nothing). Re-arming makes it fire again.
func TestSRQLimitEvent(t *testing.T) {
	r := newSRQRig(t, 2, qp.SRQAttr{MaxWR: 16})
	r.postSRQ(t, 0, 8, 64)
	if err := r.srq.SetLimit(4); err != nil {
		t.Fatal(err)
	}
	if a, err := r.srq.Query(); err != nil || a.Limit != 4 {
		t.Fatalf("query after arming: %+v, %v", a, err)
	}
	for i := range 4 { // 4 left: not below the limit
		r.send(t, i%2, 64, byte(i+1))
	}
	pollWait(t, r.rx.cq, make([]cq.WC, 4), 4, 10*time.Second)
	noEvent(t, r.rx.ctx, "4 receives left, limit 4")
	r.send(t, 0, 64, 5)
	ev, err := waitEvent(t, r.rx.ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("no SRQ limit event: %v", err)
	}
	if ev.Type != uverbs.EventSRQLimitReached || ev.Object != r.srq || ev.Element != r.srq.Verbs().UserHandle() {
		t.Fatalf("event %v (object %v), want SRQ limit reached on %p", ev, ev.Object, r.srq)
	}
	t.Logf("event: %v", ev)
	if a, err := r.srq.Query(); err != nil || a.Limit != 0 {
		t.Fatalf("query after the event: %+v, %v; want limit 0", a, err)
	}
	r.send(t, 1, 64, 6)
	noEvent(t, r.rx.ctx, "after the event, limit disarmed")
	if err := r.srq.SetLimit(3); err != nil { // 2 left < 3: fires on the next take
		t.Fatal(err)
	}
	r.send(t, 0, 64, 7)
	if ev, err := waitEvent(t, r.rx.ctx, 10*time.Second); err != nil || ev.Type != uverbs.EventSRQLimitReached || ev.Object != r.srq {
		t.Fatalf("re-armed: %v, %v", ev, err)
	}
	pollWait(t, r.rx.cq, make([]cq.WC, 3), 3, 10*time.Second)
	if err := r.srq.SetLimit(1 << 20); !errors.Is(err, unix.EINVAL) {
		t.Errorf("limit above the capacity: %v, want EINVAL", err)
	}
}

// Resizing keeps what is posted: the kernel copies the receives into the
// new ring, Resize maps it and unmaps the old one; messages then land in
// the receives posted before and after, in order.
func TestSRQResize(t *testing.T) {
	r := newSRQRig(t, 1, qp.SRQAttr{MaxWR: 8})
	r.postSRQ(t, 0, 5, 128)
	// Two taken first, so that the old ring's indices are not where the
	// new ring's start.
	r.send(t, 0, 128, 1)
	r.send(t, 0, 128, 2)
	pollWait(t, r.rx.cq, make([]cq.WC, 2), 2, 10*time.Second)
	before := uverbsMappings(t)
	d0, _ := r.srq.Cap()
	if err := r.srq.Resize(100); err != nil {
		t.Fatal(err)
	}
	d1, _ := r.srq.Cap()
	a, err := r.srq.Query()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("depth %d -> %d, query %+v", d0, d1, a)
	if d1 < 100 || a.MaxWR < 100 {
		t.Fatalf("after Resize(100): depth %d, query %+v", d1, a)
	}
	if got := uverbsMappings(t); got != before {
		t.Errorf("%d uverbs mappings after the resize, %d before: the old ring was not unmapped", got, before)
	}
	r.postSRQ(t, 5, 60, 128) // more than the old depth
	for i := range 63 {
		r.send(t, 0, 128, byte(i+1))
	}
	wc := pollWait(t, r.rx.cq, make([]cq.WC, 63), 63, 20*time.Second)
	for k, w := range wc {
		if w.WRID != uint64(k+2) || w.Status != cq.Success {
			t.Fatalf("completion %d: %+v", k, w)
		}
	}
	// Shrinking below what is posted is refused; to what is posted, fine.
	r.postSRQ(t, 0, 10, 128)
	if err := r.srq.Resize(4); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("shrink below the posted receives: %v, want EINVAL", err)
	}
	if err := r.srq.Resize(16); err != nil {
		t.Fatalf("shrink to 16 with 10 posted: %v", err)
	}
	for i := range 10 {
		r.send(t, 0, 128, byte(i+1))
	}
	wc = pollWait(t, r.rx.cq, make([]cq.WC, 10), 10, 10*time.Second)
	for k, w := range wc {
		if w.WRID != uint64(k) || w.Status != cq.Success {
			t.Fatalf("after shrinking, completion %d: %+v", k, w)
		}
	}
}

// QPs on an SRQ map no receive ring; Context.Close frees an SRQ left open
// with QPs on it (QPs first, then the SRQ, then the PD), unmapping its ring.
func TestSRQContextCloseFreesIt(t *testing.T) {
	dev := devices(t, 1)[0]
	d, err := uverbs.DeviceByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	before := uverbsMappings(t)
	ctx, err := uverbs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	srq, err := qp.NewSRQ(pd, qp.SRQAttr{MaxWR: 32})
	if err != nil {
		t.Fatal(err)
	}
	// The kernel makes no receive ring for a QP on an SRQ: one mapping
	// (the send ring) per such QP, two for an ordinary QP. The QPs stay
	// reachable until the end: a dropped one may be collected by its GC
	// clean-up while Context.Close runs, which is another test's subject
	// (TestDroppedChildrenOfLiveContextAreCollected) and would make the
	// count below race with it.
	var qps []*qp.QP
	defer func() { runtime.KeepAlive(qps) }()
	for i := range 3 {
		m0 := uverbsMappings(t)
		attr := qp.Spec{Type: qp.RC, SendCQ: c, RecvCQ: c, SRQ: srq}
		want := 1
		if i == 2 {
			attr.SRQ, want = nil, 2
		}
		q, err := qp.New(pd, attr)
		if err != nil {
			t.Fatal(err)
		}
		qps = append(qps, q)
		if got := uverbsMappings(t) - m0; got != want {
			t.Errorf("QP %d (SRQ %v) added %d ring mappings, want %d", i, attr.SRQ != nil, got, want)
		}
	}
	if err := srq.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("closing an SRQ QPs use: %v, want EBUSY", err)
	}
	if err := ctx.Close(); err != nil {
		t.Fatalf("Context.Close: %v", err)
	}
	if got := uverbsMappings(t); got != before {
		t.Errorf("%d uverbs mappings after Close, %d before", got, before)
	}
	if err := srq.PostRecv([]qp.RecvWR{{ID: 1}}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostRecv after Context.Close: %v", err)
	}
	if err := srq.Close(); err != nil {
		t.Errorf("Close after Context.Close: %v", err)
	}
}
