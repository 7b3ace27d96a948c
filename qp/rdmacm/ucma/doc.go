// Package ucma speaks the RDMA CM kernel ABI (<rdma/rdma_user_cm.h>,
// module rdma_ucm): commands written to /dev/infiniband/rdma_cm and the
// events read back from it, one Channel per open of the device, as
// librdmacm's rdma_create_event_channel. Ids are the kernel's handles
// (uint32); what they mean, and the connection set-up built from them, is
// package rdmacm's.
//
// It is its own package, beside the verbs one (uverbs), because the verbs
// never use it: a program that only posts work requests links none of it.
// It is public, not internal to rdmacm, for the tests and tools that drive
// the ABI step by step (the events rdmacm consumes, ids it never exposes).
//
// This package owns the unsafe code of the CM ABI: every raw struct is
// pinned to the kernel header by abi_test.go.
package ucma
