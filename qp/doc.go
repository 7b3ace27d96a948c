// Package qp provides queue pairs on rdma_rxe devices: creation, the state
// transitions (RESET→INIT→RTR→RTS, ERROR), and posting work.
//
// Posting is the hot path and costs no allocation: PostRecv writes receive
// WQEs into the mapped receive ring (no system call); PostSend writes send
// WQEs into the send ring and then rings one doorbell for the whole call,
// however many requests it carries. Both are all or nothing: a call that
// fails posts nothing. Completions are polled from the CQs (package cq).
//
// Queue pairs are reliable connected (RC), unreliable connected (UC: SEND
// and RDMA WRITE, with or without immediate data; Connect sends UC's
// attributes) or unreliable datagram (UD: ActivateUD, an address handle per
// destination from NewAH, SEND with or without immediate data of at most
// the port's MTU, multicast groups). A UD receive buffer starts with the
// GRHLen-byte network header, which ParseDatagram decodes. On RoCE every
// path is global, so ToRTR and NewAH need the peer's GID and the local GID
// index.
package qp
