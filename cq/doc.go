// Package cq provides completion queues: polling work completions (a memory
// operation on the rdma_rxe ring, allocation-free), arming for
// notification, and completion channels that deliver "this CQ has new
// completions" events through a pollable fd.
//
// # The RC path
//
// Where a CQ sits on the way from a device to a completion (errors elided;
// package qp's example runs both sides of a connection):
//
//	dev, _ := uverbs.DeviceByName("rxe0")
//	ctx, _ := uverbs.Open(dev)                // defer ctx.Close(): it closes the rest too
//	port, _ := ctx.QueryPort(1)
//	sgid, _ := ctx.FindGID(1, netip.MustParseAddr("10.99.0.1")) // this side's RoCE v2 GID
//	pd, _ := ctx.AllocPD()
//	buf, _ := uverbs.NewBuffer(4096, uverbs.BufferOptions{})
//	mr, _ := pd.RegisterMR(buf, uverbs.AccessLocalWrite)
//	c, _ := cq.New(ctx, 64, nil)
//	q, _ := qp.New(pd, qp.InitAttr{Type: qp.RC, SendCQ: c, RecvCQ: c})
//	me := qp.Peer{QPN: q.Num(), PSN: 1, GID: sgid.GID} // send me.MarshalText() to the peer,
//	var peer qp.Peer                                   // and peer.UnmarshalText what it sends
//	q.Connect(peer, qp.ConnectOptions{SGID: sgid, PathMTU: port.ActiveMTU, SendPSN: me.PSN})
//	rx, _ := mr.SGE(0, 2048)
//	tx, _ := mr.SGE(2048, 64) // 64 bytes from buf.Bytes()[2048:]
//	q.PostRecv([]qp.RecvWR{{ID: 1, SGEs: []uverbs.SGE{rx}}}) // receives before the peer sends
//	q.PostSend([]qp.SendWR{{ID: 2, Opcode: qp.Send, Flags: qp.Signaled, SGEs: []uverbs.SGE{tx}}})
//	wc := make([]cq.WC, 8)
//	n, _ := c.Poll(wc) // poll until both are in: wc[i].WRID, .Status (cq.Success), .Opcode
//
// Every work request that completes, successfully or not, yields one [WC]:
// its WRID is the request's ID, Status is [Success] or why it failed, Opcode
// what completed ([OpSend], [OpRecv], ...; a request's qp.SendOpcode prints
// "WR_SEND", a completion's [Opcode] "WC_SEND").
//
// # Events
//
// The usual event loop:
//
//	ch, _ := cq.NewChannel(ctx)
//	c, _ := cq.New(ctx, 256, ch)
//	c.ReqNotify(false)
//	for {
//		ev, err := ch.GetEvent(goctx) // blocks; honours goctx cancellation
//		...
//		ev.Ack(1)
//		ev.ReqNotify(false) // re-arm first, then drain: no completion is missed
//		for n, _ := ev.Poll(wcs); n > 0; n, _ = ev.Poll(wcs) { ... }
//	}
//
// Every event GetEvent returns must be acknowledged with Ack before the CQ
// is closed: Close refuses, naming the count, while events are
// unacknowledged (libibverbs' ibv_destroy_cq would block instead).
//
// # Providers
//
// [CQ.Verbs] returns the kernel-object layer's CQ beneath, for provider
// code only; applications need nothing from it, and an async event about a
// CQ reports the *CQ of this package ([uverbs.AsyncEvent.Object]).
// [ErrClosed] is [uverbs.ErrClosed], the one value every package returns.
package cq
