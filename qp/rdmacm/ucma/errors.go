package ucma

import (
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Error is a failed RDMA CM command: the verb (named like the librdmacm
// call, e.g. "rdma_resolve_addr") and the errno the kernel returned.
// errors.Is(err, unix.EINVAL) and similar checks work through Unwrap.
type Error struct {
	Verb  string
	Errno unix.Errno
}

// Error returns "ucma: <verb>: <errno text>".
func (e *Error) Error() string { return "ucma: " + e.Verb + ": " + e.Errno.Error() }

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

// ErrClosed is matched (errors.Is) by every error of a Channel method
// called after Close. It is uverbs.ErrClosed (net.ErrClosed), the one
// "closed" value of every pureverbs package.
var ErrClosed = uverbs.ErrClosed

// cmdError wraps errno for verb.
func cmdError(verb string, errno unix.Errno) error {
	return &Error{Verb: verb, Errno: errno}
}

// closedError is verb's error on a closed channel.
func closedError(verb string) error { return fmt.Errorf("ucma: %s: %w", verb, ErrClosed) }
