package rxe

import (
	"encoding/binary"
	"strconv"
	"unsafe"
)

// WCStatus is a completion status: the kernel's enum ib_wc_status, which
// rdma_rxe writes into struct ib_uverbs_wc (and which equals libibverbs'
// enum ibv_wc_status).
type WCStatus uint32

// Completion statuses.
const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocEECOpErr    WCStatus = 3
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCMWBindErr      WCStatus = 6
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCLocRDDViolErr  WCStatus = 14
	WCRemInvRDReqErr WCStatus = 15
	WCRemAbortErr    WCStatus = 16
	WCInvEECNErr     WCStatus = 17
	WCInvEECStateErr WCStatus = 18
	WCFatalErr       WCStatus = 19
	WCRespTimeoutErr WCStatus = 20
	WCGeneralErr     WCStatus = 21
)

// numWCStatus is the number of statuses the kernel defines.
const numWCStatus = 22

var wcStatusNames = [numWCStatus]string{
	"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR",
	"WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR",
	"REM_ACCESS_ERR", "REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",
	"REM_INV_RD_REQ_ERR", "REM_ABORT_ERR", "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR",
	"RESP_TIMEOUT_ERR", "GENERAL_ERR",
}

// String is the enum ib_wc_status name without its IB_WC_ prefix.
func (s WCStatus) String() string {
	if s < numWCStatus {
		return wcStatusNames[s]
	}
	return "WCStatus(" + strconv.FormatUint(uint64(s), 10) + ")"
}

// WCOpcode is the operation a completion reports: the kernel's enum
// ib_wc_opcode (send side equal to enum ib_uverbs_wc_opcode).
type WCOpcode uint32

// Completion opcodes. Receive completions have the WCRecv bit set.
const (
	WCSend            WCOpcode = 0   // IB_WC_SEND
	WCRDMAWrite       WCOpcode = 1   // IB_WC_RDMA_WRITE
	WCRDMARead        WCOpcode = 2   // IB_WC_RDMA_READ
	WCCompSwap        WCOpcode = 3   // IB_WC_COMP_SWAP
	WCFetchAdd        WCOpcode = 4   // IB_WC_FETCH_ADD
	WCBindMW          WCOpcode = 5   // IB_WC_BIND_MW
	WCLocalInv        WCOpcode = 6   // IB_WC_LOCAL_INV
	WCFlush           WCOpcode = 8   // IB_WC_FLUSH (kernel 6.2+)
	WCAtomicWrite     WCOpcode = 9   // IB_WC_ATOMIC_WRITE (kernel 6.2+)
	WCRecv            WCOpcode = 128 // IB_WC_RECV
	WCRecvRDMAWithImm WCOpcode = 129 // IB_WC_RECV_RDMA_WITH_IMM
)

// String names the opcode as libibverbs does without "IBV_" ("WC_SEND"),
// so that a completion's opcode never reads like a request's ("WR_SEND").
func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "WC_SEND"
	case WCRDMAWrite:
		return "WC_RDMA_WRITE"
	case WCRDMARead:
		return "WC_RDMA_READ"
	case WCCompSwap:
		return "WC_COMP_SWAP"
	case WCFetchAdd:
		return "WC_FETCH_ADD"
	case WCBindMW:
		return "WC_BIND_MW"
	case WCLocalInv:
		return "WC_LOCAL_INV"
	case WCFlush:
		return "WC_FLUSH"
	case WCAtomicWrite:
		return "WC_ATOMIC_WRITE"
	case WCRecv:
		return "WC_RECV"
	case WCRecvRDMAWithImm:
		return "WC_RECV_RDMA_WITH_IMM"
	}
	return "WCOpcode(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// IsRecv reports whether the completion is for a receive work request.
func (o WCOpcode) IsRecv() bool { return o&WCRecv != 0 }

// WCFlags are the wc_flags rdma_rxe writes: the kernel's enum ib_wc_flags.
// (libibverbs numbers its flags past WithImm differently; these are the
// kernel's, which is what the ring carries.)
type WCFlags uint32

// Completion flags.
const (
	WCGRH            WCFlags = 1 << 0 // IB_WC_GRH: a GRH precedes UD payloads
	WCWithImm        WCFlags = 1 << 1 // IB_WC_WITH_IMM: Imm is valid
	WCWithInvalidate WCFlags = 1 << 2 // IB_WC_WITH_INVALIDATE: Imm holds the invalidated rkey
)

// WC is a decoded work completion (struct ib_uverbs_wc).
type WC struct {
	WRID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32
	// Imm is the immediate data in host byte order when Flags has
	// WCWithImm, or the invalidated rkey with WCWithInvalidate.
	Imm          uint32
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	PortNum      uint8
}

// decodeWC reads the completion in slot p into w, every field, one at a
// time (a composite literal would be built in a temporary and copied).
func decodeWC(p unsafe.Pointer, w *WC) {
	u := (*uverbsWC)(p)
	w.WRID = u.wrID
	w.Status = WCStatus(u.status)
	w.Opcode = WCOpcode(u.opcode)
	w.VendorErr = u.vendorErr
	w.ByteLen = u.byteLen
	w.QPNum = u.qpNum
	w.SrcQP = u.srcQP
	w.Flags = WCFlags(u.wcFlags)
	w.PKeyIndex = u.pkeyIndex
	w.SLID = u.slid
	w.SL = u.sl
	w.DLIDPathBits = u.dlidPathBits
	w.PortNum = u.portNum
	if w.Flags&WCWithInvalidate != 0 {
		w.Imm = binary.NativeEndian.Uint32(u.ex[:])
	} else {
		w.Imm = binary.BigEndian.Uint32(u.ex[:])
	}
}
