package qp

import (
	"github.com/pureverbs/pureverbs/rxe"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Errors of PostSend and PostRecv. Nothing of a failing call is posted.
// Each matches (errors.Is) the errno librxe returns for the same case:
// ENOMEM for a full queue, EMSGSIZE for a long UD payload, EOPNOTSUPP for a
// missing opcode, EINVAL otherwise. Each is this package's own value
// ("qp: ..."), which also matches the rxe error it stands for.
var (
	// ErrQueueFull: the work queue has no room for all the requests.
	ErrQueueFull error = &postError{"qp: work queue full", rxe.ErrQueueFull}
	// ErrTooManySGEs: an SGE list longer than the QP's Cap allows.
	ErrTooManySGEs error = &postError{"qp: too many SGEs", rxe.ErrTooManySGEs}
	// ErrInlineTooLong: inline data longer than Cap.MaxInlineData.
	ErrInlineTooLong error = &postError{"qp: inline data too long", rxe.ErrInlineTooLong}
	// ErrInvalidWR: an unknown opcode or flag, inline data with an SGE
	// list, an inline RDMA READ, or a message longer than 2 GiB.
	ErrInvalidWR error = &postError{"qp: invalid work request", rxe.ErrInvalidWR}
	// ErrAtomicAlign: an atomic's RemoteAddr is not 8-byte aligned.
	ErrAtomicAlign error = &postError{"qp: atomic remote address not 8-byte aligned", rxe.ErrAtomicAlign}
	// ErrAtomicSize: an atomic without exactly one 8-byte SGE.
	ErrAtomicSize error = &postError{"qp: atomic needs one 8-byte SGE", rxe.ErrAtomicSize}
	// ErrOpNotSupported: the device lacks the opcode (AtomicWrite, Flush
	// before 6.2); it matches ErrNotSupported.
	ErrOpNotSupported error = &postError{"qp: opcode not supported by the device", rxe.ErrOpNotSupported}
	// ErrOpcodeTransport: the opcode (or an AH) does not fit the QP's
	// transport, e.g. RDMA on UD, RDMA READ on UC.
	ErrOpcodeTransport error = &postError{"qp: opcode or addressing not supported by the QP's transport", rxe.ErrOpcodeTransport}
	// ErrMessageTooLong: a UD payload longer than the port's MTU (rxe would
	// report it sent and send nothing).
	ErrMessageTooLong error = &postError{"qp: UD message longer than the path MTU", rxe.ErrMessageTooLong}
	// ErrDoorbell: the requests were queued but the doorbell failed; they
	// may still execute and must not be posted again. It is the rxe
	// provider's (rxe.ErrDoorbell): the error that carries it also
	// carries the doorbell's errno.
	ErrDoorbell = rxe.ErrDoorbell
	// ErrSRQAttached: PostRecv on a QP created on an SRQ (post the
	// receives to the SRQ). A caller's mistake: it matches EINVAL, not
	// ErrNotSupported.
	ErrSRQAttached error = &postError{"qp: the QP takes its receives from an SRQ: post them to the SRQ", rxe.ErrSRQAttached}
	// ErrBadState: the QP's state does not allow posting (sends need RTS or
	// later, receives anything but RESET) (EINVAL).
	ErrBadState error = &stateError{}
)

// postError is one of this package's posting errors: its own text over
// the rxe error it stands for, which it unwraps to (and through it to the
// errno). The values are preallocated: returning one allocates nothing.
type postError struct {
	msg string
	rxe error
}

func (e *postError) Error() string { return e.msg }
func (e *postError) Unwrap() error { return e.rxe }

// ownError returns this package's value for an rxe posting error, and
// any other error as it is.
func ownError(err error) error {
	switch err {
	case nil:
		return nil
	case rxe.ErrQueueFull:
		return ErrQueueFull
	case rxe.ErrTooManySGEs:
		return ErrTooManySGEs
	case rxe.ErrInlineTooLong:
		return ErrInlineTooLong
	case rxe.ErrInvalidWR:
		return ErrInvalidWR
	case rxe.ErrAtomicAlign:
		return ErrAtomicAlign
	case rxe.ErrAtomicSize:
		return ErrAtomicSize
	case rxe.ErrOpNotSupported:
		return ErrOpNotSupported
	case rxe.ErrOpcodeTransport:
		return ErrOpcodeTransport
	case rxe.ErrMessageTooLong:
		return ErrMessageTooLong
	case rxe.ErrSRQAttached:
		return ErrSRQAttached
	}
	return err
}

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
