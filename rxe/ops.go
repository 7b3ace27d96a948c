package rxe

import (
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// MWBind is the binding an OpBindMW work request makes: the window (by
// its current rkey) comes to cover Length bytes at Addr of the memory
// region whose lkey is MRLKey, with Access, under the rkey NewRKey. rdma_rxe
// keeps the window's index (the upper 24 bits) and takes only the low 8 bits
// (the key) of NewRKey. A zero Length unbinds a type 1 window.
type MWBind struct {
	MWRKey  uint32        // the window's rkey before the bind
	NewRKey uint32        // its rkey after the bind (new key in the low byte)
	MRLKey  uint32        // the region the window is bound to (needs uverbs.AccessMWBind)
	Addr    uint64        // start of the window, inside the region
	Length  uint64        // bytes; 0 unbinds (type 1 only)
	Access  uverbs.Access // remote access granted through the window
}

// FlushSpec is what an OpFlush work request flushes.
type FlushSpec struct {
	// Length is the number of bytes from RemoteAddr (FlushRange level).
	Length uint32
	// Type is where the data must be placed: FlushGlobal (visible) or
	// FlushPersistent (persistent memory only).
	Type FlushType
	// Level is FlushRange (the Length bytes) or FlushMR (the whole region).
	Level FlushLevel
}

// FlushType is the placement type of a flush (enum ib_placement_type).
type FlushType uint8

// Flush placement types.
const (
	FlushGlobal     FlushType = 1 << 0 // IB_FLUSH_GLOBAL
	FlushPersistent FlushType = 1 << 1 // IB_FLUSH_PERSISTENT
)

// FlushLevel is the selectivity level of a flush (enum ib_selectivity_level).
type FlushLevel uint8

// Flush selectivity levels.
const (
	FlushRange FlushLevel = 0 // IB_FLUSH_RANGE
	FlushMR    FlushLevel = 1 // IB_FLUSH_MR
)

// Device capability bits that the 6.2+ opcodes need.
const (
	capFlushGlobal     = uverbs.DeviceCapFlushGlobal
	capFlushPersistent = uverbs.DeviceCapFlushPersistent
	capAtomicWrite     = uverbs.DeviceCapAtomicWrite
)

// opCaps are the optional opcodes a QP's device executes.
type opCaps uint8

const (
	opCapAtomicWrite opCaps = 1 << iota
	opCapFlushGlobal
	opCapFlushPersistent
)

// opCapsFrom reads the optional opcodes from the device capability flags.
func opCapsFrom(flags uint64) opCaps {
	var c opCaps
	if flags&capAtomicWrite != 0 {
		c |= opCapAtomicWrite
	}
	if flags&capFlushGlobal != 0 {
		c |= opCapFlushGlobal
	}
	if flags&capFlushPersistent != 0 {
		c |= opCapFlushPersistent
	}
	return c
}

// Errors of PostSend for the atomic, window and flush opcodes. Like the
// others, nothing of a failing call is posted.
var (
	// ErrAtomicAlign: an atomic's RemoteAddr is not 8-byte aligned (EINVAL).
	ErrAtomicAlign error = &postError{"rxe: atomic remote address not 8-byte aligned", unix.EINVAL, nil}
	// ErrAtomicSize: a compare-and-swap or fetch-and-add whose SGE list is
	// not one SGE of exactly 8 bytes, or an inline atomic (EINVAL).
	ErrAtomicSize error = &postError{"rxe: atomic needs one 8-byte SGE", unix.EINVAL, nil}
	// ErrOpNotSupported: the device does not execute the opcode
	// (ATOMIC_WRITE and FLUSH before kernel 6.2, or a flush type the
	// device lacks) (EOPNOTSUPP). It also matches uverbs.ErrNotSupported.
	ErrOpNotSupported error = &postError{"rxe: opcode not supported by the device", unix.EOPNOTSUPP, uverbs.ErrNotSupported}
)

// checkExt validates the opcodes beyond SEND/WRITE/READ; ok is false for
// an opcode it does not know.
func (q *sendQueue) checkExt(wr *SendWR) (n uint32, ok bool, err error) {
	switch wr.Opcode {
	case OpSendWithInv:
		return 0, true, nil // checked like a SEND by the caller
	case OpAtomicCmpAndSwp, OpAtomicFetchAndAdd:
		if wr.Flags&Inline != 0 || len(wr.SGEs) != 1 || wr.SGEs[0].Length != 8 {
			return 0, true, ErrAtomicSize
		}
		if wr.RemoteAddr&7 != 0 {
			return 0, true, ErrAtomicAlign
		}
		return 8, true, nil
	case OpAtomicWrite:
		if q.caps&opCapAtomicWrite == 0 {
			return 0, true, ErrOpNotSupported
		}
		if wr.Flags&Inline != 0 || len(wr.SGEs) != 0 {
			return 0, true, ErrInvalidWR
		}
		if wr.RemoteAddr&7 != 0 {
			return 0, true, ErrAtomicAlign
		}
		return 8, true, nil
	case OpFlush:
		need := opCapFlushGlobal
		switch wr.Flush.Type {
		case FlushGlobal:
		case FlushPersistent:
			need = opCapFlushPersistent
		default:
			return 0, true, ErrInvalidWR
		}
		if wr.Flush.Level > FlushMR || wr.Flags&Inline != 0 || len(wr.SGEs) != 0 {
			return 0, true, ErrInvalidWR
		}
		if q.caps&need == 0 {
			return 0, true, ErrOpNotSupported
		}
		return wr.Flush.Length, true, nil
	case OpLocalInv, OpBindMW:
		if wr.Flags&Inline != 0 || len(wr.SGEs) != 0 {
			return 0, true, ErrInvalidWR
		}
		return 0, true, nil
	}
	return 0, false, nil
}
