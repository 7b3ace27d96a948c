package qp

import (
	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Errors of PostSend and PostRecv. Nothing of a failing call is posted.
// Each matches (errors.Is) the errno librxe returns for the same case:
// ENOMEM for a full queue, EMSGSIZE for a long UD payload, EOPNOTSUPP for a
// missing opcode, EINVAL otherwise.
var (
	// ErrQueueFull: the work queue has no room for all the requests.
	ErrQueueFull = rxe.ErrQueueFull
	// ErrTooManySGEs: an SGE list longer than the QP's Cap allows.
	ErrTooManySGEs = rxe.ErrTooManySGEs
	// ErrInlineTooLong: inline data longer than Cap.MaxInlineData.
	ErrInlineTooLong = rxe.ErrInlineTooLong
	// ErrInvalidWR: an unknown opcode or flag, inline data with an SGE
	// list, an inline RDMA READ, or a message longer than 2 GiB.
	ErrInvalidWR = rxe.ErrInvalidWR
	// ErrAtomicAlign: an atomic's RemoteAddr is not 8-byte aligned.
	ErrAtomicAlign = rxe.ErrAtomicAlign
	// ErrAtomicSize: an atomic without exactly one 8-byte SGE.
	ErrAtomicSize = rxe.ErrAtomicSize
	// ErrOpNotSupported: the device lacks the opcode (AtomicWrite, Flush
	// before 6.2); it matches ErrNotSupported.
	ErrOpNotSupported = rxe.ErrOpNotSupported
	// ErrOpcodeTransport: the opcode (or an AH) does not fit the QP's
	// transport, e.g. RDMA on UD, RDMA READ on UC.
	ErrOpcodeTransport = rxe.ErrOpcodeTransport
	// ErrMessageTooLong: a UD payload longer than the port's MTU (rxe would
	// report it sent and send nothing).
	ErrMessageTooLong = rxe.ErrMessageTooLong
	// ErrDoorbell: the requests were queued but the doorbell failed; they
	// may still execute and must not be posted again.
	ErrDoorbell = rxe.ErrDoorbell
	// ErrSRQAttached: PostRecv on a QP created on an SRQ (post the
	// receives to the SRQ). A caller's mistake: it matches EINVAL, not
	// ErrNotSupported.
	ErrSRQAttached = rxe.ErrSRQAttached
	// ErrBadState: the QP's state does not allow posting (sends need RTS or
	// later, receives anything but RESET) (EINVAL).
	ErrBadState error = &stateError{}
)

type stateError struct{}

func (*stateError) Error() string { return "qp: wrong state for posting" }
func (*stateError) Unwrap() error { return unix.EINVAL }

// ErrClosed is returned by the methods of a closed QP, SRQ or AH. It is
// uverbs.ErrClosed: every package returns that one value.
var ErrClosed = uverbs.ErrClosed

// ErrNotSupported reports a QP type or feature the kernel, the device or
// this package lacks. It is uverbs.ErrNotSupported, the one value for every
// package.
var ErrNotSupported = uverbs.ErrNotSupported
