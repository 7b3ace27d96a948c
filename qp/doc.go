// Package qp provides queue pairs on rdma_rxe devices: creation, the state
// transitions (RESET→INIT→RTR→RTS, ERROR), and posting work.
//
// Posting is the hot path and costs no allocation: PostRecv writes receive
// WQEs into the mapped receive ring (no system call); PostSend writes send
// WQEs into the send ring and then rings one doorbell for the whole call,
// however many requests it carries. Both are all or nothing: a call that
// fails posts nothing. Completions are polled from the CQs (package cq).
//
// Only reliable-connected (RC) queue pairs are supported so far; UC, UD and
// shared receive queues are planned. On RoCE every path is global, so
// ToRTR needs the peer's GID and the local GID index.
package qp
