package qp_test

import (
	"fmt"
	"log"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// An RC SEND with immediate data between two queue pairs on one rxe
// device: device, context, PD, registered memory, CQ, QPs connected to each
// other, a receive posted, a send, both completions polled. Two programs
// would trade QP number, PSN and GID out of band instead (qp.Peer's
// MarshalText; package rdmacm does it by address). It runs in rxevm's VM
// (rxe0 on veth0) and is skipped on a host without rxe0.
func Example() {
	dev, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	port, err := ctx.QueryPort(1)
	if err != nil {
		log.Fatal(err)
	}
	gid, err := ctx.NetdevGID(1, "veth0") // the RoCE v2 GID of rxe0's netdev
	if err != nil {
		log.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	buf, err := uverbs.NewBuffer(8192, uverbs.BufferOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegisterMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	c, err := cq.New(ctx, 64, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	var qps [2]*qp.QP
	for i := range qps {
		if qps[i], err = qp.New(pd, qp.Spec{Type: qp.RC, SendCQ: c, RecvCQ: c}); err != nil {
			log.Fatal(err)
		}
		defer qps[i].Close()
	}
	for i, q := range qps {
		// Two programs would exchange these as qp.Peer records
		// (MarshalText) over TCP.
		peer := qp.Peer{QPN: qps[1-i].Num(), PSN: 0, GID: gid.GID}
		if err := q.Connect(peer, qp.ConnectOptions{SGID: gid, PathMTU: port.ActiveMTU}); err != nil {
			log.Fatal(err)
		}
	}

	// The receiver posts a buffer (the second half of buf), the sender
	// sends from the first half.
	msg := buf.Bytes()
	copy(msg, "hello over rxe")
	second, err := mr.SGE(4096, 4096)
	if err != nil {
		log.Fatal(err)
	}
	first, err := mr.SGE(0, 14)
	if err != nil {
		log.Fatal(err)
	}
	recv := qp.RecvWR{ID: 1, SGEs: []uverbs.SGE{second}}
	if err := qps[1].PostRecv([]qp.RecvWR{recv}); err != nil {
		log.Fatal(err)
	}
	send := qp.SendWR{ID: 2, Opcode: qp.SendWithImm, Flags: qp.Signaled, Imm: 42,
		SGEs: []uverbs.SGE{first}}
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
	for _, w := range wc {
		if w.Opcode.IsRecv() {
			fmt.Printf("received %q, imm %d, status %v\n", msg[4096:4096+w.ByteLen], w.Imm, w.Status)
		}
	}
	// Output:
	// received "hello over rxe", imm 42, status SUCCESS
}

// A peer record in rdma-core's pingpong exchange format, as the server's
// side channel and every pingpong tool trade it.
func ExamplePeer_MarshalText() {
	p := qp.Peer{QPN: 0x11, PSN: 0x3a5f1c, GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}}
	b, _ := p.MarshalText()
	fmt.Println(string(b))
	var q qp.Peer
	if err := q.UnmarshalText([]byte("0000:000012:00abcd:00000000000000000000ffff0a630002")); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("QPN %#x PSN %#x GID %v\n", q.QPN, q.PSN, q.GID)
	// Output:
	// 0000:000011:3a5f1c:00000000000000000000ffff0a630001
	// QPN 0x12 PSN 0xabcd GID ::ffff:10.99.0.2
}
