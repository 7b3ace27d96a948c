package qp_test

import (
	"fmt"
	"log"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// A datagram between two UD queue pairs on one rxe device: an address
// handle towards the GID, the destination QPN and Q_Key in the request, and
// on the receiving side the GRH area in front of the payload, decoded.
func ExampleNewAH() {
	dev, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close() // also destroys what the example does not close
	gid, err := ctx.NetdevGID(1, "veth0")
	if err != nil {
		log.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	buf, err := uverbs.NewBuffer(4096, uverbs.BufferOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	c, err := cq.New(ctx, 16, nil)
	if err != nil {
		log.Fatal(err)
	}
	const qkey = 0x11111111
	var qps [2]*qp.QP
	for i := range qps {
		if qps[i], err = qp.New(pd, qp.Spec{Type: qp.UD, SendCQ: c, RecvCQ: c}); err != nil {
			log.Fatal(err)
		}
		if err := qps[i].ActivateUD(qp.UDOptions{QKey: qkey}); err != nil {
			log.Fatal(err)
		}
	}
	ah, err := qp.NewAH(pd, qp.AHSpec{DGID: gid.GID, SGID: gid})
	if err != nil {
		log.Fatal(err)
	}

	// Receive into [2048, 2048+40+1024): the GRH area, then the payload.
	rsge, _ := mr.SGE(2048, qp.GRHLen+1024)
	if err := qps[1].PostRecv([]qp.RecvWR{{ID: 1, SGEs: []uverbs.SGE{rsge}}}); err != nil {
		log.Fatal(err)
	}
	copy(buf.Bytes(), "a datagram")
	ssge, _ := mr.SGE(0, 10)
	send := qp.SendWR{ID: 2, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{ssge},
		AH: ah, RemoteQPN: qps[1].Num(), RemoteQKey: qkey}
	if err := qps[0].PostSend([]qp.SendWR{send}); err != nil {
		log.Fatal(err)
	}
	wc := make([]cq.WC, 2)
	for got, deadline := 0, time.Now().Add(5*time.Second); got < 2; {
		n, err := c.Poll(wc[got:])
		if err != nil {
			log.Fatal(err)
		}
		if got += n; n == 0 && time.Now().After(deadline) {
			log.Fatal("no completions")
		}
	}
	for i := range wc {
		if wc[i].Opcode.IsRecv() {
			d, err := qp.ParseDatagram(&wc[i], buf.Bytes()[2048:])
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%q from %v, QPN %d\n", d.Payload, d.GRH.Src(), d.SrcQP)
		}
	}
}
