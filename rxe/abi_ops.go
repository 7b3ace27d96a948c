package rxe

import "unsafe"

// The other members of the wr union in struct rxe_send_wr (rdma_user_rxe.h),
// viewed over its largest member like rdmaWR. Offsets are pinned by
// abi_ops_test.go.

// atomicWR is the atomic member: CAS and FAA operands.
type atomicWR struct {
	remoteAddr uint64
	compareAdd uint64
	swap       uint64
	rkey       uint32
	_          uint32
}

// mwWR is the mw member: a memory window bind.
type mwWR struct {
	addr   uint64
	length uint64
	mrLKey uint32
	mwRKey uint32
	rkey   uint32
	access uint32
}

// flushWR is the flush member (kernel 6.2 and later).
type flushWR struct {
	remoteAddr uint64
	length     uint32
	rkey       uint32
	typ        uint8
	level      uint8
	_          [6]byte
}

// atomic views the wr union as its atomic member.
func (w *sendWR) atomic() *atomicWR { return (*atomicWR)(unsafe.Pointer(&w.wr)) }

// mw views the wr union as its mw member.
func (w *sendWR) mw() *mwWR { return (*mwWR)(unsafe.Pointer(&w.wr)) }

// flush views the wr union as its flush member.
func (w *sendWR) flush() *flushWR { return (*flushWR)(unsafe.Pointer(&w.wr)) }
