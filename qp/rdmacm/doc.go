// Package rdmacm connects RC and UD queue pairs by IP address and port
// through the kernel's RDMA connection manager (the ucma ABI on
// /dev/infiniband/rdma_cm), interoperable with librdmacm programs (rping,
// ucmatose, udaddy, perftest -R, NVMe-oF initiators) in both directions.
//
// It is shaped like the net package. Dial resolves an address, builds a
// queue pair on the device that owns the route, connects it and returns a
// *Conn whose QP is in RTS:
//
//	c, err := rdmacm.Dial(ctx, "10.99.0.2:7174", rdmacm.Options{Source: netip.MustParseAddr("10.99.0.1")})
//
// Listen binds and listens; Accept returns the next connection, set up
// the same way:
//
//	l, err := rdmacm.Listen(ctx, "10.99.0.2:7174", rdmacm.Options{})
//	c, err := l.Accept(ctx)
//
// A Conn owns what the package built for it (uverbs.Context share, PD, CQ,
// QP) and its CM id on an event channel of its own, so one connection's
// unread events never delay another's. Its Close disconnects and releases
// all of it. Options.Setup runs once the QP is in INIT, before anything is
// sent: the place to register memory and post the first receives. If the
// connect then fails (a rejection, a deadline), Options.Teardown undoes
// Setup before the QP, CQ and PD go (deregister its MRs there), and the
// failed Dial or Accept leaves nothing behind.
//
// For callers who build their own queue pair, Listener.Request returns
// the request (its private data, the peer's addresses and parameters) and
// the device context it arrived on; Request.AcceptQP then takes that QP
// through INIT, RTR and RTS and accepts, or Request.Reject refuses with
// private data. On the active side Resolve returns a Route (address and
// route resolved, the device context it leaves from); Route.ConnectQP
// connects the caller's QP built there, with librdmacm's transitions for it
// (rdma_init_qp_attr, rdma_establish). ResolveUD and ListenUD do the same
// for a caller's UD QP (a SIDR exchange).
//
// Every blocking step takes a context and stops when it is done. A
// rejected connect is a *RejectError with the reason and the peer's
// private data; errors.Is(err, unix.ECONNREFUSED) is true for it.
//
// The package example runs a Listen/Dial pair with a two-phase accept and
// a first SEND in rxevm's VM, its output checked.
//
// In librdmacm's terms: Dial is rdma_create_id, rdma_resolve_addr,
// rdma_resolve_route, rdma_create_qp and rdma_connect (and the RTU that
// rdma_get_cm_event sends on CONNECT_RESPONSE); Listen is rdma_bind_addr and
// rdma_listen; Listener.Request is rdma_get_cm_event's CONNECT_REQUEST with
// rdma_migrate_id to a channel of the request's own; Request.Accept and
// AcceptQP are rdma_accept after rdma_create_qp or on the caller's QP;
// Request.Reject is rdma_reject (at most 148 bytes of private data);
// Conn.WaitEvent, Disconnect and Close are rdma_get_cm_event,
// rdma_disconnect and rdma_destroy_qp/rdma_destroy_id; Resolve and
// Route.ConnectQP are the active side with the caller's QP (rping -q's
// client). Over RoCE a REQ carries at most 56 bytes of private data, a REP
// 196.
//
// The QP transitions are librdmacm's: on the active side INIT from
// rdma_init_qp_attr when the QP is created; on CONNECT_RESPONSE INIT again
// (the access the CM grants), RTR and RTS, then the RTU (an accept without
// parameters); on the passive side INIT when the QP is created, RTR and RTS
// before the accept.
package rdmacm
