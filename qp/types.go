package qp

import (
	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// The work request and attribute types are the provider's and the kernel
// ABI layer's own, re-exported: a SendWR goes into the ring as it is, with no
// conversion on the post path.

// Type is the transport of a queue pair.
type Type = uverbs.QPType

// Queue pair types: RC (reliable connected), UC (unreliable connected:
// SEND, SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM) and UD (datagrams:
// SEND and SEND_WITH_IMM, each at most the port's MTU).
const (
	RC = uverbs.QPTypeRC
	UC = uverbs.QPTypeUC
	UD = uverbs.QPTypeUD
)

// State is a queue pair state.
type State = uverbs.QPState

// Queue pair states.
const (
	Reset = uverbs.QPStateReset
	Init  = uverbs.QPStateInit
	RTR   = uverbs.QPStateRTR
	RTS   = uverbs.QPStateRTS
	SQD   = uverbs.QPStateSQD
	SQE   = uverbs.QPStateSQE
	Error = uverbs.QPStateError
)

// MTU is a path MTU (uverbs.MTU256 ... uverbs.MTU4096).
type MTU = uverbs.MTU

// Attr holds the modifiable attributes of a queue pair; an AttrMask says
// which are meaningful.
type Attr = uverbs.QPAttr

// AttrMask selects Attr fields for Modify.
type AttrMask = uverbs.QPAttrMask

// Attribute mask bits.
const (
	AttrState           = uverbs.QPAttrState
	AttrCurState        = uverbs.QPAttrCurState
	AttrAccessFlags     = uverbs.QPAttrAccessFlags
	AttrPKeyIndex       = uverbs.QPAttrPKeyIndex
	AttrPort            = uverbs.QPAttrPort
	AttrQKey            = uverbs.QPAttrQKey
	AttrAV              = uverbs.QPAttrAV
	AttrPathMTU         = uverbs.QPAttrPathMTU
	AttrTimeout         = uverbs.QPAttrTimeout
	AttrRetryCnt        = uverbs.QPAttrRetryCnt
	AttrRNRRetry        = uverbs.QPAttrRNRRetry
	AttrRQPSN           = uverbs.QPAttrRQPSN
	AttrMaxQPRdAtomic   = uverbs.QPAttrMaxQPRdAtomic
	AttrMinRNRTimer     = uverbs.QPAttrMinRNRTimer
	AttrSQPSN           = uverbs.QPAttrSQPSN
	AttrMaxDestRdAtomic = uverbs.QPAttrMaxDestRdAtomic
	AttrCap             = uverbs.QPAttrCap
	AttrDestQPN         = uverbs.QPAttrDestQPN
)

// SGE is one scatter/gather element; make it with uverbs.MR.SGE, which
// checks the range against the region.
type SGE = uverbs.SGE

// SendWR is a send work request, as it goes into the send ring with no
// conversion:
//
//	type SendWR struct {
//		ID         uint64        // returned in the completion (WC.WRID)
//		Opcode     SendOpcode    // Send, SendWithImm, RDMAWrite, RDMAWriteWithImm, RDMARead
//		Flags      SendFlags     // Signaled, Solicited, Inline, Fence
//		Imm        uint32        // immediate data, host order (the *WithImm opcodes)
//		SGEs       []uverbs.SGE  // gather list (scatter list for RDMARead); from MR.SGE
//		Inline     []byte        // the payload of an Inline request, up to Cap.MaxInline
//		RemoteAddr uint64        // the peer's memory, for the RDMA, atomic and flush opcodes
//		RKey       uint32
//		CompareAdd uint64        // AtomicCmpAndSwp: compare; AtomicFetchAndAdd: addend
//		Swap       uint64        // AtomicCmpAndSwp: swap; AtomicWrite: the value stored
//		InvRKey    uint32        // SendWithInv (peer's window), LocalInv (this side's)
//		Bind       MWBind        // BindMW: the window, region, range, access and new rkey
//		Flush      FlushSpec     // Flush: length, placement type, level
//		AH         *AH           // UD only: the destination's address handle (NewAH)
//		RemoteQPN  uint32        // UD only: the destination QP (MulticastQPN for a group)
//		RemoteQKey uint32        // UD only: its Q_Key, sent as it is
//	}
//
// The atomics (AtomicCmpAndSwp, AtomicFetchAndAdd) take exactly one SGE of
// 8 bytes, where the old remote value lands, and an 8-byte aligned
// RemoteAddr; PostSend refuses anything else with ErrAtomicSize or
// ErrAtomicAlign. AtomicWrite and Flush exist from kernel 6.2 on; elsewhere
// PostSend refuses them with ErrOpNotSupported (errors.Is
// uverbs.ErrNotSupported). With the Fence flag a request waits until every
// earlier RDMA READ and atomic has completed.
type SendWR = rxe.SendWR

// RecvWR is a receive work request: where one incoming message goes.
//
//	type RecvWR struct {
//		ID   uint64       // returned in the completion (WC.WRID)
//		SGEs []uverbs.SGE // scatter list; from MR.SGE
//	}
type RecvWR = rxe.RecvWR

// SendOpcode is the operation of a send work request.
type SendOpcode = rxe.Opcode

// Send opcodes.
const (
	Send             = rxe.OpSend
	SendWithImm      = rxe.OpSendWithImm
	RDMAWrite        = rxe.OpRDMAWrite
	RDMAWriteWithImm = rxe.OpRDMAWriteWithImm
	RDMARead         = rxe.OpRDMARead
	// AtomicCmpAndSwp: 8-byte compare-and-swap at RemoteAddr (RC).
	AtomicCmpAndSwp = rxe.OpAtomicCmpAndSwp
	// AtomicFetchAndAdd: 8-byte fetch-and-add at RemoteAddr (RC).
	AtomicFetchAndAdd = rxe.OpAtomicFetchAndAdd
	// LocalInv invalidates this side's type 2 window InvRKey.
	LocalInv = rxe.OpLocalInv
	// BindMW binds a type 2 window (type 1: QP.BindMW).
	BindMW = rxe.OpBindMW
	// SendWithInv sends and invalidates the peer's type 2 window InvRKey.
	SendWithInv = rxe.OpSendWithInv
	// Flush (kernel 6.2+): make remote data visible/persistent.
	Flush = rxe.OpFlush
	// AtomicWrite (kernel 6.2+): 8-byte atomic store of Swap at RemoteAddr.
	AtomicWrite = rxe.OpAtomicWrite
)

// MWBind is the binding of a BindMW request (see rxe.MWBind).
type MWBind = rxe.MWBind

// FlushSpec is what a Flush request flushes.
type FlushSpec = rxe.FlushSpec

// Flush placement types and levels.
const (
	FlushGlobal     = rxe.FlushGlobal
	FlushPersistent = rxe.FlushPersistent
	FlushRange      = rxe.FlushRange
	FlushMR         = rxe.FlushMR
)

// SendFlags modify a send work request.
type SendFlags = rxe.SendFlags

// Send flags.
const (
	Signaled  = rxe.Signaled
	Solicited = rxe.Solicited
	Inline    = rxe.Inline
	Fence     = rxe.Fence
)

// Cap is the capacity of a queue pair: work requests per queue, SGEs per
// request and inline bytes per send.
type Cap struct {
	MaxSendWR  uint32
	MaxRecvWR  uint32
	MaxSendSGE uint32
	MaxRecvSGE uint32
	MaxInline  uint32
}

func capFrom(c uverbs.QPCap) Cap {
	return Cap{c.MaxSendWR, c.MaxRecvWR, c.MaxSendSGE, c.MaxRecvSGE, c.MaxInlineData}
}

func (c Cap) verbs() uverbs.QPCap {
	return uverbs.QPCap{MaxSendWR: c.MaxSendWR, MaxRecvWR: c.MaxRecvWR, MaxSendSGE: c.MaxSendSGE, MaxRecvSGE: c.MaxRecvSGE, MaxInlineData: c.MaxInline}
}

// Errors of PostSend and PostRecv; errors.Is also matches the errno librxe
// returns for the same case (ENOMEM for a full queue, EINVAL otherwise).
var (
	ErrQueueFull     = rxe.ErrQueueFull
	ErrTooManySGEs   = rxe.ErrTooManySGEs
	ErrInlineTooLong = rxe.ErrInlineTooLong
	ErrInvalidWR     = rxe.ErrInvalidWR
	ErrClosed        = rxe.ErrClosed
	// ErrAtomicAlign: an atomic's RemoteAddr is not 8-byte aligned.
	ErrAtomicAlign = rxe.ErrAtomicAlign
	// ErrAtomicSize: an atomic without exactly one 8-byte SGE.
	ErrAtomicSize = rxe.ErrAtomicSize
	// ErrOpNotSupported: the device lacks the opcode (AtomicWrite, Flush
	// before 6.2); it matches uverbs.ErrNotSupported.
	ErrOpNotSupported = rxe.ErrOpNotSupported
	// ErrOpcodeTransport: the opcode (or an AH) does not fit the QP's
	// transport, e.g. RDMA on UD, RDMA READ on UC.
	ErrOpcodeTransport = rxe.ErrOpcodeTransport
	// ErrMessageTooLong: a UD payload longer than the port's MTU (rxe would
	// report it sent and send nothing) (EMSGSIZE).
	ErrMessageTooLong = rxe.ErrMessageTooLong
	// ErrDoorbell: the requests were queued but the doorbell failed.
	ErrDoorbell = rxe.ErrDoorbell
	// ErrBadState: the QP's state does not allow posting (sends need RTS or
	// later, receives anything but RESET) (EINVAL).
	ErrBadState error = &stateError{}
)

type stateError struct{}

func (*stateError) Error() string { return "qp: wrong state for posting" }
func (*stateError) Unwrap() error { return unix.EINVAL }

// ErrNotSupported reports a QP type or feature not supported yet.
var ErrNotSupported = rxe.ErrNotSupported
