// Package cq provides completion queues: polling work completions (a memory
// operation on the rdma_rxe ring, allocation-free), arming for
// notification, and completion channels that deliver "this CQ has new
// completions" events through a pollable fd.
//
// # The RC path
//
// A CQ is made on a device context ([New]), given to qp.New as the send
// and receive CQ of queue pairs, and polled for the completions of the work
// requests posted on them. Package qp's example runs the RC path from the
// device to the completions, in rxevm's VM, its output checked.
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
//	ch, _ := cq.NewChannel(devctx)
//	c, _ := cq.New(devctx, 256, ch)
//	c.ReqNotify(false)
//	for {
//		ev, err := ch.GetEvent(ctx) // blocks; honours ctx's cancellation
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
