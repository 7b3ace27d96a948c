package rxe

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/pureverbs/pureverbs/rxe/internal/ring"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// SGE is uverbs.SGE: its layout is also struct rxe_sge, so SGE lists are
// copied into WQEs as they are.
type SGE = uverbs.SGE

// Opcode is a send work request opcode. The values are the kernel's
// enum ib_wr_opcode (= enum ib_uverbs_wr_opcode in rdma/ib_user_verbs.h),
// which rdma_rxe reads from the WQE; librxe stores libibverbs' IBV_WR_* there
// unchanged because the two enums agree.
type Opcode uint32

// Send opcodes supported on RC queue pairs.
const (
	OpRDMAWrite        Opcode = 0 // IB_UVERBS_WR_RDMA_WRITE
	OpRDMAWriteWithImm Opcode = 1 // IB_UVERBS_WR_RDMA_WRITE_WITH_IMM
	OpSend             Opcode = 2 // IB_UVERBS_WR_SEND
	OpSendWithImm      Opcode = 3 // IB_UVERBS_WR_SEND_WITH_IMM
	OpRDMARead         Opcode = 4 // IB_UVERBS_WR_RDMA_READ
	// OpAtomicCmpAndSwp compares the 8 bytes at RemoteAddr with CompareAdd
	// and, if equal, stores Swap; the old value lands in the one 8-byte SGE.
	OpAtomicCmpAndSwp Opcode = 5 // IB_UVERBS_WR_ATOMIC_CMP_AND_SWP
	// OpAtomicFetchAndAdd adds CompareAdd to the 8 bytes at RemoteAddr; the
	// old value lands in the one 8-byte SGE.
	OpAtomicFetchAndAdd Opcode = 6 // IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD
	// OpLocalInv invalidates the type 2 memory window whose rkey is InvRKey.
	OpLocalInv Opcode = 7 // IB_UVERBS_WR_LOCAL_INV
	// OpBindMW binds a memory window as Bind describes.
	OpBindMW Opcode = 8 // IB_UVERBS_WR_BIND_MW
	// OpSendWithInv is a SEND that also invalidates the peer's type 2
	// window whose rkey is InvRKey.
	OpSendWithInv Opcode = 9 // IB_UVERBS_WR_SEND_WITH_INV
	// OpFlush makes Flush.Length bytes at RemoteAddr visible (Flush.Type)
	// at the peer; kernel 6.2 and later.
	OpFlush Opcode = 14 // IB_UVERBS_WR_FLUSH
	// OpAtomicWrite writes the 8 bytes of Swap (in host byte order) to
	// RemoteAddr as one atomic store; kernel 6.2 and later.
	OpAtomicWrite Opcode = 15 // IB_UVERBS_WR_ATOMIC_WRITE
)

var opcodeNames = [...]string{
	OpRDMAWrite:         "WR_RDMA_WRITE",
	OpRDMAWriteWithImm:  "WR_RDMA_WRITE_WITH_IMM",
	OpSend:              "WR_SEND",
	OpSendWithImm:       "WR_SEND_WITH_IMM",
	OpRDMARead:          "WR_RDMA_READ",
	OpAtomicCmpAndSwp:   "WR_ATOMIC_CMP_AND_SWP",
	OpAtomicFetchAndAdd: "WR_ATOMIC_FETCH_AND_ADD",
	OpLocalInv:          "WR_LOCAL_INV",
	OpBindMW:            "WR_BIND_MW",
	OpSendWithInv:       "WR_SEND_WITH_INV",
	OpFlush:             "WR_FLUSH",
	OpAtomicWrite:       "WR_ATOMIC_WRITE",
}

// String names the opcode as libibverbs does without "IBV_" ("WR_SEND"),
// so that a request's opcode never reads like a completion's ("WC_SEND").
func (o Opcode) String() string {
	if int(o) < len(opcodeNames) && opcodeNames[o] != "" {
		return opcodeNames[o]
	}
	return "Opcode(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// hasImm reports whether the opcode carries immediate data.
func (o Opcode) hasImm() bool { return o == OpSendWithImm || o == OpRDMAWriteWithImm }

// isRDMA reports whether the opcode addresses remote memory.
func (o Opcode) isRDMA() bool {
	return o == OpRDMAWrite || o == OpRDMAWriteWithImm || o == OpRDMARead
}

// SendFlags are the send_flags of a WQE: the kernel's enum ib_send_flags
// (equal to libibverbs' IBV_SEND_*).
type SendFlags uint32

// Send flags.
const (
	// Fence waits for earlier RDMA READs to complete before this request runs.
	Fence SendFlags = 1 << 0
	// Signaled asks for a completion even when the QP does not signal all.
	Signaled SendFlags = 1 << 1
	// Solicited sets the solicited-event bit, waking a peer armed for it.
	Solicited SendFlags = 1 << 2
	// Inline copies the payload (SendWR.Inline) into the WQE itself: no MR is
	// needed and the buffer may be reused as soon as PostSend returns.
	Inline SendFlags = 1 << 3
)

// knownSendFlags are the flags PostSend accepts.
const knownSendFlags = Fence | Signaled | Solicited | Inline

// SendWR is a send work request.
type SendWR struct {
	// ID is returned in the completion (wr_id).
	ID uint64
	// Opcode is the operation.
	Opcode Opcode
	// Flags are the send flags.
	Flags SendFlags
	// Imm is the immediate data, in host byte order, for OpSendWithImm and
	// OpRDMAWriteWithImm; it travels in network byte order.
	Imm uint32
	// SGEs is the gather list (the scatter list for OpRDMARead). It must be
	// empty when Flags has Inline.
	SGEs []SGE
	// Inline is the payload of an Inline request, at most the QP's granted
	// max_inline_data bytes.
	Inline []byte
	// RemoteAddr and RKey address the peer's memory for the RDMA, atomic
	// and flush opcodes. Atomics need RemoteAddr 8-byte aligned.
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd and Swap are the atomic operands: the compare value and
	// the swap value of OpAtomicCmpAndSwp, the addend of
	// OpAtomicFetchAndAdd (CompareAdd), the value OpAtomicWrite stores
	// (Swap).
	CompareAdd uint64
	Swap       uint64
	// InvRKey is the rkey OpSendWithInv invalidates at the peer and
	// OpLocalInv invalidates here.
	InvRKey uint32
	// Bind is the binding OpBindMW makes.
	Bind MWBind
	// Flush is what OpFlush flushes.
	Flush FlushSpec
	// AH, RemoteQPN and RemoteQKey address a UD request: the address
	// handle of the destination, its QP number (0xffffff for a multicast
	// group) and the Q_Key it expects. rdma_rxe sends the Q_Key as it is
	// (a top bit set does not select the sending QP's own). Only UD
	// requests have them.
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// RecvWR is a receive work request: the scatter list one incoming message
// is written to.
type RecvWR struct {
	ID   uint64
	SGEs []SGE
}

// postError is a posting error: a fixed message that unwraps to the errno
// librxe returns for the same case, so errors.Is(err, unix.ENOMEM) works.
// The values are preallocated, so returning one allocates nothing.
type postError struct {
	msg   string
	errno unix.Errno
	is    error // a package-wide sentinel it also matches, or nil
}

func (e *postError) Error() string { return e.msg }

// Unwrap gives the errno and, for the closed errors, ErrClosed.
func (e *postError) Unwrap() []error {
	if e.is == nil {
		return []error{e.errno}
	}
	return []error{e.errno, e.is}
}

// Errors from PostSend and PostRecv. Nothing of a failing call is posted.
var (
	// ErrQueueFull: the work queue has no room for all the requests (ENOMEM).
	ErrQueueFull error = &postError{"rxe: work queue full", unix.ENOMEM, nil}
	// ErrTooManySGEs: an SGE list is longer than the QP's granted maximum (EINVAL).
	ErrTooManySGEs error = &postError{"rxe: too many SGEs", unix.EINVAL, nil}
	// ErrInlineTooLong: inline data exceeds the QP's granted max_inline_data (EINVAL).
	ErrInlineTooLong error = &postError{"rxe: inline data too long", unix.EINVAL, nil}
	// ErrInvalidWR: an unknown opcode or flag, inline data with an SGE list,
	// inline RDMA READ, or a message longer than 2 GiB (EINVAL).
	ErrInvalidWR error = &postError{"rxe: invalid work request", unix.EINVAL, nil}
)

// ErrClosed is matched (errors.Is) by the error of every method of a queue
// that has been closed: it is uverbs.ErrClosed (net.ErrClosed), the one
// value for every package.
var ErrClosed = uverbs.ErrClosed

// The closed errors of the post and poll paths, preallocated (returning
// one allocates nothing): the verb and the object, wrapping ErrClosed.
var (
	errSendQueueClosed error = &postError{"rxe: post_send: queue pair closed", unix.EBADF, ErrClosed}
	errRecvQueueClosed error = &postError{"rxe: post_recv: receive queue closed", unix.EBADF, ErrClosed}
	errCQClosed        error = &postError{"rxe: poll_cq: completion queue closed", unix.EBADF, ErrClosed}
	errAHClosed        error = &postError{"rxe: post_send: the request's address handle is closed", unix.EBADF, ErrClosed}
)

// ErrDoorbell is matched (errors.Is) by the error PostSend returns when
// every request was written and published to the kernel but the doorbell
// command failed: the requests are queued and may still execute (rxe's
// requester also runs on its own), so they must not be posted again. The
// error is a *DoorbellError holding the doorbell's error.
var ErrDoorbell = errors.New("rxe: requests queued, doorbell failed")

// DoorbellError is a failed doorbell after the requests were queued.
type DoorbellError struct {
	Err error // the POST_SEND command's error
}

// Error says the requests were queued and why the doorbell failed.
func (e *DoorbellError) Error() string { return ErrDoorbell.Error() + ": " + e.Err.Error() }

// Unwrap gives both ErrDoorbell and the doorbell's own error (errno).
func (e *DoorbellError) Unwrap() []error { return []error{ErrDoorbell, e.Err} }

// ErrNotSupported reports a queue type or feature this provider does not do yet.
// It is uverbs.ErrNotSupported, the one sentinel for every package.
var ErrNotSupported = uverbs.ErrNotSupported

// maxMessage is the largest message IB transports carry (2^31 bytes).
const maxMessage = 1 << 31

// sgeTotal sums an SGE list's lengths, failing past maxMessage.
func sgeTotal(sges []SGE) (uint32, error) {
	var n uint64
	for i := range sges {
		n += uint64(sges[i].Length)
	}
	if n > maxMessage {
		return 0, ErrInvalidWR
	}
	return uint32(n), nil
}

// wrapErr names a verb in an error from a non-hot path.
func wrapErr(verb string, err error) error { return fmt.Errorf("rxe: %s: %w", verb, err) }

// ErrBadRing reports a ring header, written by the kernel, that does not
// describe the memory it sits in (a slot size or count that is not a power
// of two, or slots that run past the end of the mapping).
var ErrBadRing = ring.ErrBad
