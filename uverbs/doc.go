// Package uverbs speaks the Linux RDMA user-verbs kernel ABI directly, without
// libibverbs and without cgo.
//
// It owns every raw struct of <rdma/ib_user_verbs.h>, <rdma/ib_user_ioctl_verbs.h>
// and <rdma/rdma_user_ioctl_cmds.h> that pureverbs uses, and the two ways the
// kernel accepts commands on /dev/infiniband/uverbsN: write() of a command
// header plus request (legacy and extended headers), and the RDMA_VERBS_IOCTL
// method/attribute interface. On top of that it offers device discovery
// through sysfs, device contexts, device/port/GID queries, protection domains,
// off-heap buffers and memory regions, completion channels, and the kernel
// side of completion queues and queue pairs.
//
// # The RC path
//
// Applications use this package for devices ([Devices], [DeviceByName],
// [Open]), the [Context] and its queries, protection domains ([PD]),
// off-heap buffers ([Buffer]) and memory regions ([MR], [MR.SGE]), and GIDs
// ([Context.FindGID], [Context.NetdevGID]); completion queues and queue
// pairs come from packages cq and qp, whose example runs the RC path from
// the device to the completions in rxevm's VM, its output checked.
//
// # Optional features
//
// Probes say whether the kernel has a feature before it is used:
// [HaveReregMR] (rdma_rxe: Linux 6.5), and in package qp HaveAtomicWrite
// and HaveFlush (Linux 6.2). A missing feature is a [*FeatureError]
// naming the kernel that adds it; it matches [ErrNotSupported], the one
// "not supported" value every package returns, as [ErrClosed] is the one
// "closed" value.
//
// # Provider API
//
// Providers only; applications use packages cq and qp. [CQ], [QP], [SRQ],
// [CompChannel] and [AH], their blueprints and attributes ([CQSpec], [QPSpec],
// [QPAttr], [QPAttrMask], [QPCap], [QPState], [QPType], [SRQSpec],
// [SRQAttr], [AHAttr], [GlobalRoute]), the raw attribute structs the RDMA
// CM ABI shares ([AHAttrABI], [QPAttrABI]) and [Context.Mmap] are the kernel
// objects beneath cq and qp, the way libibverbs installs driver.h for its
// providers. Queue memory (the rings a provider such as rdma_rxe maps) is
// not handled here: a provider passes its driver-specific response buffer
// to CreateCQ/CreateQP and maps the rings with [Context.Mmap]. Nothing an
// application needs returns one of these: async events report the cq and
// qp objects ([AsyncEvent.Object], set through the attributes' Owner).
//
// # Names of parameter structs
//
// Every pureverbs package names a struct of parameters by its kind, one
// word a kind:
//   - Spec: the blueprint a create call takes ([QPSpec], [CQSpec],
//     [SRQSpec]; qp.Spec, qp.AHSpec) or what one request does
//     (qp.FlushSpec).
//   - Attr: the attributes of an existing object as the verbs define
//     them, what a query reports and a modify takes ([DeviceAttr],
//     [PortAttr], [QPAttr], [AHAttr], [SRQAttr]; qp.Attr); a struct the
//     verbs name otherwise keeps that name ([QPCap], qp.Cap). An ABI
//     suffix marks the kernel's raw layout of one ([AHAttrABI],
//     [QPAttrABI]).
//   - Params: the required arguments of one operation on an existing
//     object: a state transition (qp.InitParams, RTRParams, RTSParams) or
//     a bind (qp.MWBindParams).
//   - Options: optional knobs whose zero value works ([BufferOptions];
//     qp.ConnectOptions, qp.UDOptions, rdmacm.Options, rsocket.Options,
//     server.ServeOptions, server.CMOptions).
//   - Config: the whole configuration of a long-running service, made by a
//     Default function and then edited (server.Config, netpoll.Config).
//
// A [*Context] parameter is named devctx outside this package (cq.New,
// qp.HaveFlush, rxe.CreateCQ), so that ctx always names a context.Context.
//
// # Ownership
//
// Every object has an idempotent Close. After Close nothing of
// the object reaches the kernel: its methods fail with ErrClosed without a
// system call (the kernel hands a freed handle to the next object), and a
// method running when Close begins finishes before the destroy is sent.
// The Context records, weakly, what was created under it; its Close wakes
// the goroutines waiting on its fds (ErrClosed), has the providers close
// what is still open (a QP under its send lock) and unmap their rings, and
// closes its fds, upon which the kernel destroys the objects: afterwards the
// process holds nothing of the context, and every method of it and its
// objects returns ErrClosed. Close may run concurrently with them.
//
// Objects dropped without Close are released by GC cleanups where that is
// safe (a safety net, not a substitute): fds close, ring mappings unmap, and
// once the Context's fds are closed the kernel frees the rest. A Buffer's
// memory is never unmapped by the collector, since slices of it may still
// be in use; it stays mapped. Package uverbs/leakcheck records every such
// release and names where the object was created; TestMain of the
// project's packages fails on any (integration/ownership_test.go checks
// the cleanups against the kernel's own resource counts). A closed
// Buffer's address range, its memory released by Close, is unmapped by a
// cleanup too: that is no leak.
//
// # Async events
//
// Context.ReadAsyncEvent and WaitAsyncEvent return the events
// of the context's async fd, each resolved to the application's CQ, QP or
// SRQ it names (by user handle; the Context picks unique ones) or to its
// port. rdma_rxe
// raises PORT_ERR/PORT_ACTIVE when its netdev goes down/up, CQ_ERR when a
// CQ overruns, SRQ_LIMIT_REACHED, SQ_DRAINED and (6.12, not 6.1)
// QP_LAST_WQE_REACHED; it never raises DEVICE_FATAL.
//
// # Removing a device
//
// rdma_rxe cannot disassociate its users, so
// `rdma link delete` (or deleting the netdev under it) blocks in the kernel
// until every process has closed every uverbs fd of the device (the
// Context's command and async fds, and the ring mappings, which hold the
// command fd open). The kernel sends nothing on those fds meanwhile (and
// 6.12's RDMA netlink UNREGISTER event only after the wait), but it
// deletes the uverbs class device first: a Context looks for its sysfs
// entry every PresenceInterval, and once it is gone Context.Err, waits on
// the async fd and completion channels, the provider's posts and polls of
// an empty CQ return a *DeviceRemovedError naming the device
// (ErrDeviceRemoved); RemovalFD becomes readable for a caller's own epoll.
// Closing the Context then lets the delete complete
// (integration/removal_test.go). A tool that deletes links while contexts
// may be open must not wait on it without a deadline.
package uverbs
