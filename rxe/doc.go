// Package rxe is the user-space half of the Soft-RoCE (rdma_rxe) provider.
// Providers only: applications use packages cq and qp, whose types are
// documented there and converted to this package's at the boundary
// (QP.PostSendFunc, CQ.PollFunc), allocation-free.
//
// The kernel shares each completion queue and each send and receive queue
// with user space as a ring of fixed-size slots (struct rxe_queue_buf in
// rdma/rdma_user_rxe.h) that the process maps through the uverbs command fd.
// Posting a receive and polling a completion are therefore plain memory
// operations on those rings; posting a send writes send WQEs into the ring and
// then rings one doorbell (an empty POST_SEND command) so the kernel runs its
// requester.
//
// The package holds the WQE and completion encodings ([SendWR], [RecvWR],
// [WC]) and the queues built on the mapped rings ([CQ], [QP]); the ring
// arithmetic lives in an internal package shared with the simulator,
// package rxesim. Applications use packages cq and qp, which wrap these
// in the user-facing API; nothing here allocates on the post and poll
// paths.
//
// The layout follows rdma-core's providers/rxe (rxe.c, rxe_queue.h) and the
// kernel's drivers/infiniband/sw/rxe (rxe_queue.h, rxe_verbs.c, rxe_req.c,
// rxe_comp.c, rxe_resp.c).
package rxe
