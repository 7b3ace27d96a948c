package uverbs

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Error is a failed kernel command: the verb (named like the libibverbs
// command, e.g. "create_cq") and the errno the kernel returned.
// errors.Is(err, unix.EINVAL) and similar checks work through Unwrap.
type Error struct {
	Verb  string
	Errno unix.Errno
}

// Error returns "uverbs: <verb>: <errno text>".
func (e *Error) Error() string { return "uverbs: " + e.Verb + ": " + e.Errno.Error() }

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

// ErrNotSupported is matched (errors.Is) by every error saying that the
// kernel, the device or this package lacks a feature that was asked for. It
// is errors.ErrUnsupported itself, the one "not supported" value of every
// pureverbs package (qp, cq, rxe, netpoll alias it); the errors returned
// wrap it with the verb and what is missing.
var ErrNotSupported = errors.ErrUnsupported

// ErrClosed is matched (errors.Is) by every error of a method called on an
// object that was already closed or destroyed, or whose Context was. It is
// net.ErrClosed itself, the one "closed" value of every pureverbs package
// (qp, cq, rxe, netpoll, server alias it), so that code written against
// the net package's idiom works unchanged; the errors returned wrap it with
// the verb and the object ("uverbs: reg_mr: PD closed: ...").
var ErrClosed = net.ErrClosed

// ErrGIDUnused is returned (wrapped) when a GID table slot holds no GID. An
// all-zero GID is never a valid address: rdma_rxe reports unpopulated slots as
// zeros without an error.
var ErrGIDUnused = errors.New("uverbs: GID table entry unused")

// ABIError reports an ABI version this package does not speak.
type ABIError struct {
	What    string // "uverbs command ABI" or "<ibdev> driver ABI"
	Version int
	Min     int
	Max     int
}

// Error names the ABI, the version found and the versions spoken.
func (e *ABIError) Error() string {
	if e.Min == e.Max {
		return fmt.Sprintf("uverbs: %s version %d not supported (need %d)", e.What, e.Version, e.Min)
	}
	return fmt.Sprintf("uverbs: %s version %d not supported (need %d..%d)", e.What, e.Version, e.Min, e.Max)
}

// Unwrap makes errors.Is(err, ErrNotSupported) true.
func (e *ABIError) Unwrap() error { return ErrNotSupported }

// cmdError wraps errno for verb.
func cmdError(verb string, errno unix.Errno) error {
	return &Error{Verb: verb, Errno: errno}
}
