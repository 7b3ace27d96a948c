package cq

import "github.com/pureverbs/pureverbs/rxe"

// WC is a work completion. It is the rxe provider's decoded struct
// ib_uverbs_wc, so that Poll copies straight out of the ring with no
// conversion:
//
//	type WC struct {
//		WRID         uint64  // the ID of the work request it completes
//		Status       Status  // Success, or why the request failed
//		Opcode       Opcode  // what completed; Opcode.IsRecv for receives
//		VendorErr    uint32  // rxe sets none
//		ByteLen      uint32  // bytes received (receives, RDMA READ)
//		Imm          uint32  // immediate data, host order (Flags has WithImm), or the invalidated rkey (WithInvalidate)
//		QPNum        uint32  // the local QP
//		SrcQP        uint32  // the sending QP (UD receives)
//		Flags        WCFlags // WithImm, WithInvalidate, GRH
//		PKeyIndex    uint16
//		SLID         uint16  // 0 on RoCE
//		SL           uint8
//		DLIDPathBits uint8
//		PortNum      uint8
//	}
//
// Only WRID, Status, QPNum and VendorErr are valid in a completion whose
// Status is not Success.
type WC = rxe.WC

// Status is a completion status (enum ib_wc_status); String gives its name.
type Status = rxe.WCStatus

// Opcode is the operation a completion reports; receive opcodes have the
// Recv bit set (Opcode.IsRecv).
type Opcode = rxe.WCOpcode

// WCFlags are a completion's flags.
type WCFlags = rxe.WCFlags

// Completion statuses.
const (
	Success        = rxe.WCSuccess
	LocLenErr      = rxe.WCLocLenErr
	LocQPOpErr     = rxe.WCLocQPOpErr
	LocProtErr     = rxe.WCLocProtErr
	WRFlushErr     = rxe.WCWRFlushErr
	BadRespErr     = rxe.WCBadRespErr
	LocAccessErr   = rxe.WCLocAccessErr
	RemInvReqErr   = rxe.WCRemInvReqErr
	RemAccessErr   = rxe.WCRemAccessErr
	RemOpErr       = rxe.WCRemOpErr
	RetryExcErr    = rxe.WCRetryExcErr
	RNRRetryExcErr = rxe.WCRNRRetryExcErr
	FatalErr       = rxe.WCFatalErr
	GeneralErr     = rxe.WCGeneralErr
)

// Completion opcodes.
const (
	OpSend            = rxe.WCSend
	OpRDMAWrite       = rxe.WCRDMAWrite
	OpRDMARead        = rxe.WCRDMARead
	OpCompSwap        = rxe.WCCompSwap
	OpFetchAdd        = rxe.WCFetchAdd
	OpRecv            = rxe.WCRecv
	OpRecvRDMAWithImm = rxe.WCRecvRDMAWithImm
)

// Completion flags.
const (
	WithImm        = rxe.WCWithImm        // Imm holds immediate data (host order)
	WithInvalidate = rxe.WCWithInvalidate // Imm holds the invalidated rkey
	GRH            = rxe.WCGRH            // a GRH precedes a UD payload
)
