// Package cq provides completion queues: polling work completions (a memory
// operation on the rdma_rxe ring, allocation-free), arming for
// notification, and completion channels that deliver "this CQ has new
// completions" events through a pollable fd.
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
package cq
