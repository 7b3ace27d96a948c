// Package qp provides queue pairs on rdma_rxe devices: creation, the state
// transitions (StateReset → StateInit → StateRTR → StateRTS, StateError),
// posting work requests, shared receive queues and address handles.
//
// # The RC path
//
// A device context and protection domain (package uverbs), registered
// memory ([uverbs.MR.SGE] makes the SGEs), a completion queue (package cq),
// then [New], [QP.Connect] (RESET → INIT → RTR → RTS in one call, to the
// peer's QP number, PSN and GID: a [Peer] record, traded out of band or by
// package rdmacm), receives posted before the peer sends, sends posted, and
// the completions polled from the CQ. The package example runs this whole
// path between two QPs on one device, in rxevm's VM, its output checked.
//
// # Posting
//
// Posting is the hot path and costs no allocation: PostRecv writes receive
// WQEs into the mapped receive ring (no system call); PostSend writes send
// WQEs into the send ring and then rings one doorbell for the whole call,
// however many requests it carries. Both are all or nothing: a call that
// fails posts nothing, and the error says why (ErrQueueFull,
// ErrTooManySGEs, ErrInvalidWR, ...; each matches librxe's errno).
// Completions are polled from the CQs (package cq): a [SendWR.ID] comes back
// as [cq.WC.WRID].
//
// # Transports
//
// Queue pairs are reliable connected (RC), unreliable connected (UC: SEND
// and RDMA WRITE, with or without immediate data; Connect sends UC's
// attributes) or unreliable datagram (UD: ActivateUD, an address handle per
// destination from NewAH, SEND with or without immediate data of at most
// the port's MTU, multicast groups). A UD receive buffer starts with the
// GRHLen-byte network header, which ParseDatagram decodes.
//
// # GIDs
//
// On RoCE every path is global: Connect, ToRTR and NewAH need the peer's GID
// and the local GID entry to send from ([ConnectOptions.SGID]), found by
// address ([uverbs.Context.FindGID]) or by netdev
// ([uverbs.Context.NetdevGID]). The zero entry is refused, never taken for
// table index 0 (the IPv6 link-local GID).
//
// # Optional features
//
// AtomicWrite and Flush need Linux 6.2: [HaveAtomicWrite] and [HaveFlush]
// say so before the first post, with a [uverbs.FeatureError] naming the
// kernel. Every package returns the same two sentinels for a missing
// feature and a closed object: [ErrNotSupported] is
// [uverbs.ErrNotSupported], [ErrClosed] is [uverbs.ErrClosed].
//
// # Providers
//
// [QP.Verbs], [SRQ.Verbs] and [AH.Verbs] return the kernel-object layer beneath
// (uverbs' QP, SRQ and AH), for provider code and diagnostics only;
// applications need nothing from it, and async events report the *QP and
// *SRQ of this package ([uverbs.AsyncEvent.Object]).
package qp
