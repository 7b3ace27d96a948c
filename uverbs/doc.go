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
// Applications use this package for devices ([Devices], [Open]), the
// [Context] and its queries, protection domains ([PD]), off-heap buffers
// ([Buffer]) and memory regions ([MR], [MR.SGE]), and GIDs
// ([Context.FindGID], [Context.NetdevGID]); completion queues and queue
// pairs come from packages cq and qp. The [CQ], [QP], [SRQ] and [CompChannel] types
// here are the kernel objects beneath those, for provider packages: queue
// memory (the rings a provider such as rdma_rxe maps) is not handled here —
// a provider passes its driver-specific response buffer to CreateCQ/CreateQP
// and maps the rings with [Context.Mmap].
//
// Ownership: every object has an idempotent Close.
// The Context records what was created under it; its Close destroys whatever
// is still open, each object before what it uses, has the provider unmap its
// rings, and closes its fds, so that afterwards the process holds nothing of
// the context. Objects dropped without Close are released by GC cleanups (a
// safety net, not a substitute): the Context's fds close themselves, each ring
// mapping and Buffer unmaps itself, and the kernel then frees the rest
// (integration/ownership_test.go checks both paths against the kernel's own
// resource counts).
//
// Async events: Context.ReadAsyncEvent and WaitAsyncEvent return the events
// of the context's async fd, each resolved to the CQ, QP or SRQ it names
// (by user handle; the Context picks unique ones) or to its port. rdma_rxe
// raises PORT_ERR/PORT_ACTIVE when its netdev goes down/up, CQ_ERR when a
// CQ overruns, SRQ_LIMIT_REACHED, SQ_DRAINED and (6.12, not 6.1)
// QP_LAST_WQE_REACHED; it never raises DEVICE_FATAL.
//
// Removing a device: rdma_rxe cannot disassociate its users, so
// `rdma link delete` (or deleting the netdev under it) blocks in the kernel
// until every process has closed every uverbs fd of the device (the
// Context's command and async fds, and the ring mappings, which hold the
// command fd open). A program sees no event while that happens; its verbs
// keep working until it closes the Context, and then the delete completes
// (integration/async_test.go, TestAsyncLinkDeleteWaitsForContext). A tool
// that deletes links while contexts may be open must not wait on it
// without a deadline.
package uverbs
