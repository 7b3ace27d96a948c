package qp

import (
	"github.com/pureverbs/pureverbs/uverbs"
)

// Type is the transport of a queue pair.
type Type uint8

// Queue pair types (enum ib_uverbs_qp_type): RC (reliable connected), UC
// (unreliable connected: SEND, SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM)
// and UD (datagrams: SEND and SEND_WITH_IMM, each at most the port's MTU).
const (
	RC Type = 2
	UC Type = 3
	UD Type = 4
)

// String is the transport's short name: "RC", "UC" or "UD".
func (t Type) String() string { return uverbs.QPType(t).String() }

// State is a queue pair state (enum ib_qp_state).
type State uint8

// Queue pair states. A new QP is in StateReset; ToInit, ToRTR and ToRTS (or
// Connect, ActivateUD) take it to StateRTS, where it sends; the kernel, or
// ToError, moves it to StateError, where all its work is flushed.
const (
	StateReset State = 0
	StateInit  State = 1
	StateRTR   State = 2 // ready to receive
	StateRTS   State = 3 // ready to send
	StateSQD   State = 4 // send queue drained
	StateSQE   State = 5 // send queue error
	StateError State = 6
)

// String is the state as libibverbs names it without IBV_QPS_: "RESET",
// "INIT", "RTR", "RTS", "SQD", "SQE", "ERR".
func (s State) String() string { return uverbs.QPState(s).String() }

// Cap is the capacity of a queue pair: work requests per queue, SGEs per
// request and inline bytes per send. It is what Spec asks for and what
// QP.Cap reports as granted.
type Cap struct {
	MaxSendWR     uint32 // send requests outstanding
	MaxRecvWR     uint32 // receive requests outstanding (0 on an SRQ)
	MaxSendSGE    uint32 // SGEs per send request
	MaxRecvSGE    uint32 // SGEs per receive request
	MaxInlineData uint32 // payload bytes of an Inline send
}

// SendWR is a send work request. PostSend reads it (and the SGEs and Inline
// bytes it points to) only during the call.
//
// The atomics (AtomicCmpAndSwp, AtomicFetchAndAdd) take exactly one SGE of
// 8 bytes, where the old remote value lands, and an 8-byte aligned
// RemoteAddr; PostSend refuses anything else with ErrAtomicSize or
// ErrAtomicAlign. AtomicWrite and Flush exist from kernel 6.2 on; elsewhere
// PostSend refuses them with ErrOpNotSupported (errors.Is uverbs.ErrNotSupported). With the Fence flag
// a request waits until every earlier RDMA READ and atomic has completed.
type SendWR struct {
	// ID is returned in the request's completion (cq.WC.WRID).
	ID uint64
	// Opcode is the operation: Send, SendWithImm, RDMAWrite, ...
	Opcode SendOpcode
	// Flags are Signaled, Solicited, Inline and Fence.
	Flags SendFlags
	// Imm is the immediate data of SendWithImm and RDMAWriteWithImm, in
	// host byte order; it travels in network byte order and arrives in the
	// receiver's cq.WC.Imm as it was given here.
	Imm uint32
	// SGEs is the gather list (the scatter list of RDMARead and of the
	// atomics' old value), made with uverbs.MR.SGE. Empty with Inline.
	SGEs []uverbs.SGE
	// Inline is the payload of an Inline request, at most
	// Cap.MaxInlineData bytes, copied into the ring by PostSend.
	Inline []byte
	// RemoteAddr and RKey address the peer's memory for the RDMA, atomic
	// and flush opcodes (from the peer's uverbs.MR.Addr and RKey).
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd is AtomicCmpAndSwp's compare value and AtomicFetchAndAdd's
	// addend.
	CompareAdd uint64
	// Swap is AtomicCmpAndSwp's new value and the 8 bytes AtomicWrite
	// stores (host byte order).
	Swap uint64
	// InvRKey is the rkey SendWithInv invalidates at the peer (its type 2
	// window) and LocalInv invalidates here.
	InvRKey uint32
	// Bind is the binding a BindMW request makes (see BindWR).
	Bind MWBind
	// Flush is what a Flush request flushes.
	Flush FlushSpec
	// AH is a UD request's destination (NewAH); nil on RC and UC.
	AH *AH
	// RemoteQPN is a UD request's destination QP (MulticastQPN for a
	// multicast group).
	RemoteQPN uint32
	// RemoteQKey is the Q_Key the destination QP expects; rdma_rxe sends
	// it as it is (a set top bit does not select the sending QP's own).
	RemoteQKey uint32
}

// RecvWR is a receive work request: where one incoming message goes.
type RecvWR struct {
	// ID is returned in the completion (cq.WC.WRID).
	ID uint64
	// SGEs is the scatter list, made with uverbs.MR.SGE; a UD receive's
	// first GRHLen bytes take the network header.
	SGEs []uverbs.SGE
}

// SendOpcode is the operation of a send work request (enum ib_wr_opcode).
// Its String is the IBV_WR_ name without "IBV_" ("WR_SEND"), so that it
// never reads like a completion's cq.Opcode ("WC_SEND").
type SendOpcode uint32

// Send opcodes. RC has them all; UC has Send, SendWithImm, RDMAWrite,
// RDMAWriteWithImm and BindMW; UD has Send and SendWithImm.
const (
	RDMAWrite        SendOpcode = 0
	RDMAWriteWithImm SendOpcode = 1
	Send             SendOpcode = 2
	SendWithImm      SendOpcode = 3
	RDMARead         SendOpcode = 4
	// AtomicCmpAndSwp: 8-byte compare-and-swap at RemoteAddr (RC).
	AtomicCmpAndSwp SendOpcode = 5
	// AtomicFetchAndAdd: 8-byte fetch-and-add at RemoteAddr (RC).
	AtomicFetchAndAdd SendOpcode = 6
	// LocalInv invalidates this side's type 2 window InvRKey.
	LocalInv SendOpcode = 7
	// BindMW binds a type 2 window as Bind says (type 1: QP.BindMW).
	BindMW SendOpcode = 8
	// SendWithInv sends and invalidates the peer's type 2 window InvRKey.
	SendWithInv SendOpcode = 9
	// Flush (kernel 6.2+) makes remote data visible or
	// persistent.
	Flush SendOpcode = 14
	// AtomicWrite (kernel 6.2+) stores the 8 bytes of Swap
	// at RemoteAddr as one atomic write.
	AtomicWrite SendOpcode = 15
)

// SendFlags modify a send work request (enum ib_send_flags).
type SendFlags uint32

// Send flags.
const (
	// Fence: wait for earlier RDMA READs and atomics to complete first.
	Fence SendFlags = 1 << 0
	// Signaled: produce a completion even when the QP does not signal all.
	Signaled SendFlags = 1 << 1
	// Solicited: set the solicited-event bit, waking a peer armed for it.
	Solicited SendFlags = 1 << 2
	// Inline: copy the payload (SendWR.Inline) into the request itself;
	// no MR is needed and the buffer is free again when PostSend returns.
	Inline SendFlags = 1 << 3
)

// MWBind is the binding of a BindMW request (BindWR builds one): the window
// whose rkey is MWRKey comes to cover Length bytes at Addr of the region
// whose lkey is MRLKey, with Access, under the rkey NewRKey. rdma_rxe keeps
// the window's index (the upper 24 bits) and takes only the low 8 bits of
// NewRKey. A zero Length unbinds a type 1 window.
type MWBind struct {
	MWRKey  uint32        // the window's rkey before the bind
	NewRKey uint32        // its rkey after the bind (uverbs.NextRKey)
	MRLKey  uint32        // the region (registered with uverbs.AccessMWBind)
	Addr    uint64        // start of the window, inside the region
	Length  uint64        // bytes; 0 unbinds (type 1 only)
	Access  uverbs.Access // remote access granted through the window
}

// FlushSpec is what a Flush request flushes.
type FlushSpec struct {
	// Length is the number of bytes from RemoteAddr (level FlushRange).
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
	FlushGlobal     FlushType = 1 << 0
	FlushPersistent FlushType = 1 << 1
)

// FlushLevel is the selectivity level of a flush (enum ib_selectivity_level).
type FlushLevel uint8

// Flush selectivity levels.
const (
	FlushRange FlushLevel = 0
	FlushMR    FlushLevel = 1
)
