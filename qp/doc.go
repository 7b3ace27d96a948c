// Package qp provides queue pairs on rdma_rxe devices: creation, the state
// transitions (StateReset → StateInit → StateRTR → StateRTS, StateError),
// posting work requests, shared receive queues and address handles.
//
// # The RC path
//
// One side of a reliable connection, from the device to a completion
// (errors elided; the package example runs both sides on one device):
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
// The Context comes from package uverbs, with the protection domain, the
// registered memory ([uverbs.MR.SGE] makes the SGEs) and the GIDs; the
// completion queue from package cq.
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
