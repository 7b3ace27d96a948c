// Package rxelink prepares a host for Soft-RoCE before any verb: it loads
// rdma_rxe (with the modules it depends on, from the running kernel's
// modules.dep, compressed or not) when the kernel has not loaded it, adds,
// lists and deletes rxe links on network devices over RDMA netlink (what
// `rdma link add NAME type rxe netdev DEV` does, without iproute2), and waits
// for a link's RoCE v2 GIDs.
//
// A host with neither kmod nor iproute2 needs only this:
//
//	if err := rxelink.LoadRxe(); err != nil { ... }        // modprobe rdma_rxe
//	if err := rxelink.Add("rxe0", "eth0"); err != nil { ... } // rdma link add rxe0 type rxe netdev eth0
//	gid, err := rxelink.WaitGID(ctx, "rxe0", netip.MustParseAddr("192.0.2.1"))
//	// gid.Index is the GID index to connect with (never assume 1: the
//	// order in which a fresh link fills its GID table is not fixed).
//
// Delete refuses to hang: the kernel's link deletion waits, without end,
// for every open file (and mapping) of the device's uverbs character device,
// so Delete first looks for them in /proc and returns a *HeldError naming
// each holder (process, fd, mappings) when they do not go away by the
// context's deadline.
//
// tools/rxe-link is this package as a command; the integration tests' rxetest
// and topology packages and the rxevm guest build their links with it.
// Everything here needs root (CAP_NET_ADMIN for links, CAP_SYS_MODULE for
// modules) and Linux.
package rxelink
