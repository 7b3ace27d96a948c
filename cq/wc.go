package cq

import "github.com/pureverbs/pureverbs/rxe"

// WC is a work completion (struct ibv_wc): Poll fills one per completed
// work request.
//
// Only WRID, Status, QPNum and VendorErr are valid in a completion whose
// Status is not Success.
type WC struct {
	// WRID is the ID of the work request it completes (qp.SendWR.ID or
	// qp.RecvWR.ID).
	WRID uint64
	// Status is Success, or why the request failed.
	Status Status
	// Opcode is what completed; Opcode.IsRecv tells receives.
	Opcode Opcode
	// VendorErr is the device's own error code; rxe sets none.
	VendorErr uint32
	// ByteLen is the number of bytes received (receives, RDMA READ); a UD
	// receive counts the GRHLen-byte header in front of the payload.
	ByteLen uint32
	// Imm is the immediate data in host byte order when Flags has
	// WithImm, or the invalidated rkey when it has WithInvalidate.
	Imm uint32
	// QPNum is the local QP's number.
	QPNum uint32
	// SrcQP is the sending QP (UD receives).
	SrcQP uint32
	// Flags are WithImm, WithInvalidate and GRH.
	Flags     WCFlags
	PKeyIndex uint16
	SLID      uint16 // 0 on RoCE
	SL        uint8
	// DLIDPathBits and PortNum are as the kernel reports them.
	DLIDPathBits uint8
	PortNum      uint8
}

// Status is a completion status (enum ib_wc_status).
type Status uint32

// String is the status's IBV_WC_ name without the prefix, e.g. "SUCCESS",
// "WR_FLUSH_ERR".
func (s Status) String() string { return rxe.WCStatus(s).String() }

// Completion statuses, the ones rdma_rxe produces.
const (
	Success        Status = 0  // IB_WC_SUCCESS
	LocLenErr      Status = 1  // IB_WC_LOC_LEN_ERR: a receive too small for the message
	LocQPOpErr     Status = 2  // IB_WC_LOC_QP_OP_ERR: a request the QP cannot execute
	LocProtErr     Status = 4  // IB_WC_LOC_PROT_ERR: an SGE outside its region, or a bad lkey
	WRFlushErr     Status = 5  // IB_WC_WR_FLUSH_ERR: flushed: the QP is in the error state
	MWBindErr      Status = 6  // IB_WC_MW_BIND_ERR: a memory window bind failed
	BadRespErr     Status = 7  // IB_WC_BAD_RESP_ERR: an unexpected response from the peer
	LocAccessErr   Status = 8  // IB_WC_LOC_ACCESS_ERR: the local region lacks the access
	RemInvReqErr   Status = 9  // IB_WC_REM_INV_REQ_ERR: the peer found the request invalid
	RemAccessErr   Status = 10 // IB_WC_REM_ACCESS_ERR: the peer's rkey, range or access refused it
	RemOpErr       Status = 11 // IB_WC_REM_OP_ERR: the peer failed to execute it
	RetryExcErr    Status = 12 // IB_WC_RETRY_EXC_ERR: no ACK within the retries
	RNRRetryExcErr Status = 13 // IB_WC_RNR_RETRY_EXC_ERR: the peer had no receive within the RNR retries
	FatalErr       Status = 19 // IB_WC_FATAL_ERR
	GeneralErr     Status = 21 // IB_WC_GENERAL_ERR
)

// Opcode is the operation a completion reports (enum ib_wc_opcode);
// receive opcodes have the OpRecv bit set (IsRecv). Its String is the
// IBV_WC_ name without "IBV_" ("WC_SEND"), so that it never reads like a
// request's qp.SendOpcode ("WR_SEND").
type Opcode uint32

// String is the opcode's IBV_WC_ name without "IBV_", e.g. "WC_RECV".
func (o Opcode) String() string { return rxe.WCOpcode(o).String() }

// IsRecv reports whether the completion is for a receive work request.
func (o Opcode) IsRecv() bool { return o&OpRecv != 0 }

// Completion opcodes.
const (
	OpSend            Opcode = 0   // IB_WC_SEND: a SEND, SEND_WITH_IMM or SEND_WITH_INV
	OpRDMAWrite       Opcode = 1   // IB_WC_RDMA_WRITE: an RDMA WRITE (with or without immediate)
	OpRDMARead        Opcode = 2   // IB_WC_RDMA_READ
	OpCompSwap        Opcode = 3   // IB_WC_COMP_SWAP
	OpFetchAdd        Opcode = 4   // IB_WC_FETCH_ADD
	OpBindMW          Opcode = 5   // IB_WC_BIND_MW
	OpLocalInv        Opcode = 6   // IB_WC_LOCAL_INV
	OpFlush           Opcode = 8   // IB_WC_FLUSH: kernel 6.2+
	OpAtomicWrite     Opcode = 9   // IB_WC_ATOMIC_WRITE: kernel 6.2+
	OpRecv            Opcode = 128 // IB_WC_RECV: a received SEND
	OpRecvRDMAWithImm Opcode = 129 // IB_WC_RECV_RDMA_WITH_IMM: a received RDMA WRITE_WITH_IMM
)

// WCFlags are a completion's flags (enum ib_wc_flags, the kernel's
// numbering).
type WCFlags uint32

// Completion flags.
const (
	GRH            WCFlags = 1 << 0 // IB_WC_GRH: a GRH precedes a UD payload
	WithImm        WCFlags = 1 << 1 // IB_WC_WITH_IMM: Imm holds immediate data (host order)
	WithInvalidate WCFlags = 1 << 2 // IB_WC_WITH_INVALIDATE: Imm holds the invalidated rkey
)

// fill writes the provider's completion r into w, field by field: a
// composite literal would be built in a temporary and copied.
func (w *WC) fill(r *rxe.WC) {
	w.WRID = r.WRID
	w.Status = Status(r.Status)
	w.Opcode = Opcode(r.Opcode)
	w.VendorErr = r.VendorErr
	w.ByteLen = r.ByteLen
	w.Imm = r.Imm
	w.QPNum = r.QPNum
	w.SrcQP = r.SrcQP
	w.Flags = WCFlags(r.Flags)
	w.PKeyIndex = r.PKeyIndex
	w.SLID = r.SLID
	w.SL = r.SL
	w.DLIDPathBits = r.DLIDPathBits
	w.PortNum = r.PortNum
}
