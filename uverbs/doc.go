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
// pairs come from packages cq and qp. The [CQ], [QP] and [CompChannel] types
// here are the kernel objects beneath those, for provider packages: queue
// memory (the rings a provider such as rdma_rxe maps) is not handled here —
// a provider passes its driver-specific response buffer to CreateCQ/CreateQP
// and maps the rings with [Context.Mmap].
//
// Ownership: every object has an idempotent Close (Destroy for CQ and QP).
// The Context records what was created under it; its Close destroys whatever
// is still open, each object before what it uses, has the provider unmap its
// rings, and closes its fds, so that afterwards the process holds nothing of
// the context. Objects dropped without Close are released by GC cleanups (a
// safety net, not a substitute): the Context's fds close themselves, each ring
// mapping and Buffer unmaps itself, and the kernel then frees the rest
// (integration/ownership_test.go checks both paths against the kernel's own
// resource counts).
package uverbs
