package rdmacm

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// ErrClosed is returned by operations on a closed Listener or Conn; it is
// uverbs.ErrClosed.
var ErrClosed = uverbs.ErrClosed

// RejectError is a connect the peer's CM or application refused (a
// REJECTED event). errors.Is(err, unix.ECONNREFUSED) is true for it.
type RejectError struct {
	Addr string // the address dialled
	// Reason is the IB CM reject reason: RejectNoListener,
	// RejectConsumer, ...
	Reason int
	// PrivateData is the REJ's private data field as received: over RoCE
	// the whole 148 bytes, the sender's data first and zeros after.
	PrivateData []byte
}

// Error names the address and the reason.
func (e *RejectError) Error() string {
	what := ""
	switch e.Reason {
	case RejectNoListener:
		what = " (no listener on that port)"
	case RejectConsumer:
		what = " (by the listening application)"
	case RejectStaleConn:
		what = " (stale connection)"
	}
	return fmt.Sprintf("rdmacm: connect to %s rejected: reason %d%s", e.Addr, e.Reason, what)
}

// Unwrap makes the error match unix.ECONNREFUSED.
func (e *RejectError) Unwrap() error { return unix.ECONNREFUSED }

// EventError is a step that ended with an error event (ADDR_ERROR,
// ROUTE_ERROR, UNREACHABLE, CONNECT_ERROR) or an unexpected one. It
// unwraps to the event's errno.
type EventError struct {
	Op     string // "resolve address", "resolve route", "connect", "accept"
	Addr   string // the address the step was about
	Event  EventType
	Status int32 // the event's status: a negative errno
}

// Error names the step, the address, the event and the errno.
func (e *EventError) Error() string {
	msg := fmt.Sprintf("rdmacm: %s %s: %v", e.Op, e.Addr, e.Event)
	if e.Status < 0 {
		msg += ": " + unix.Errno(-e.Status).Error()
	} else if e.Status > 0 {
		msg += fmt.Sprintf(" (status %d)", e.Status)
	}
	if e.Event == EventAddrError && unix.Errno(-e.Status) == unix.ENODEV {
		msg += " (no RDMA device owns an address that routes to it)"
	}
	return msg
}

// Unwrap returns the event's errno (nil for a non-negative status).
func (e *EventError) Unwrap() error {
	if e.Status < 0 {
		return unix.Errno(-e.Status)
	}
	return nil
}

// wrapStep names the step and the address in err, which already names the
// verb.
func wrapStep(op, addr string, err error) error {
	var ee *EventError
	var re *RejectError
	if errors.As(err, &ee) || errors.As(err, &re) {
		return err
	}
	return fmt.Errorf("rdmacm: %s %s: %w", op, addr, err)
}
