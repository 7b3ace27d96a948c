//go:build integration

package integration

import (
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// srqRig is a receiver on rxe1 whose n QPs share one SRQ, each connected
// to its own QP of a sender on rxe0.
type srqRig struct {
	tx, rx *qpEnd
	srq    *qp.SRQ
	txQPs  []*qp.QP
	rxQPs  []*qp.QP
}

func newSRQRig(t *testing.T, n int, attr qp.SRQAttr) *srqRig {
	t.Helper()
	devs := devices(t, 2)
	r := &srqRig{
		tx: openEnd(t, devs[0], endOpts{bufSize: 1 << 16, cqe: 1024}),
		rx: openEnd(t, devs[1], endOpts{bufSize: 1 << 16, cqe: 1024}),
	}
	var err error
	if r.srq, err = qp.NewSRQ(r.rx.pd, attr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "SRQ", r.srq.Close()) })
	for range n {
		rq, err := qp.New(r.rx.pd, qp.Spec{Type: qp.RC, SendCQ: r.rx.cq, RecvCQ: r.rx.cq, SRQ: r.srq})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeOK(t, "QP on SRQ", rq.Close()) })
		tq, err := qp.New(r.tx.pd, qp.Spec{Type: qp.RC, SendCQ: r.tx.cq, RecvCQ: r.tx.cq})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeOK(t, "QP", tq.Close()) })
		connectOne(t, r.tx, tq, r.rx, rq)
		r.txQPs, r.rxQPs = append(r.txQPs, tq), append(r.rxQPs, rq)
	}
	return r
}

// postSRQ posts count receives of size bytes each, slot i at i*size.
func (r *srqRig) postSRQ(t *testing.T, first, count, size int) {
	t.Helper()
	for i := first; i < first+count; i++ {
		if err := r.srq.PostRecv([]qp.RecvWR{{ID: uint64(i), SGEs: []uverbs.SGE{sge(r.rx, i*size%(1<<16), size)}}}); err != nil {
			t.Fatalf("post SRQ receive %d: %v", i, err)
		}
	}
}

// send sends one message of size bytes filled with fill from sender QP i
// and waits for its completion.
func (r *srqRig) send(t *testing.T, i, size int, fill byte) {
	t.Helper()
	b := r.tx.buf.Bytes()
	for k := range size {
		b[k] = fill
	}
	if err := r.txQPs[i].PostSend([]qp.SendWR{{ID: uint64(fill), Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{sge(r.tx, 0, size)}}}); err != nil {
		t.Fatal(err)
	}
	wc := pollWait(t, r.tx.cq, make([]cq.WC, 1), 1, 10*time.Second)
	if wc[0].Status != cq.Success {
		t.Fatalf("send from QP %d: %v", i, wc[0].Status)
	}
}
