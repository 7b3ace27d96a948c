package uverbs

import (
	"errors"
	"fmt"

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

// ErrNotSupported is returned (wrapped) when the kernel, the device or this
// package lacks a feature that was asked for.
var ErrNotSupported = errors.New("uverbs: not supported")

// ErrClosed is returned by methods of an object that was already closed or
// destroyed.
var ErrClosed = errors.New("uverbs: object already closed")

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
