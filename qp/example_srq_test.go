package qp_test

import (
	"log"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Several queue pairs receiving from one shared receive queue, with the
// limit event armed so that the program hears when the SRQ runs low.
func ExampleNewSRQ() {
	dev, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close() // also destroys what the example does not close
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	buf, err := uverbs.NewBuffer(64*1024, uverbs.BufferOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	srq, err := qp.NewSRQ(pd, qp.SRQAttr{MaxWR: 64, MaxSGE: 1})
	if err != nil {
		log.Fatal(err)
	}
	c, err := cq.New(ctx, 256, nil)
	if err != nil {
		log.Fatal(err)
	}
	for range 4 {
		// No receive queue of their own: everything arrives through srq.
		if _, err := qp.New(pd, qp.Spec{Type: qp.RC, SendCQ: c, RecvCQ: c, SRQ: srq}); err != nil {
			log.Fatal(err)
		}
	}
	recvs := make([]qp.RecvWR, 16)
	for i := range recvs {
		sge, err := mr.SGE(i*4096, 4096)
		if err != nil {
			log.Fatal(err)
		}
		recvs[i] = qp.RecvWR{ID: uint64(i), SGEs: []uverbs.SGE{sge}}
	}
	if err := srq.PostRecv(recvs); err != nil { // all 16 or none
		log.Fatal(err)
	}
	// Ask for uverbs.EventSRQLimitReached once fewer than 4 remain
	// (Context.WaitAsyncEvent delivers it, naming srq.Verbs()).
	if err := srq.SetLimit(4); err != nil {
		log.Fatal(err)
	}
}
