//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

var (
	// ErrNotSupported is matched (errors.Is) by every error saying the
	// kernel lacks a feature: ErrKernelTooOld and ErrNoBusyPoll.
	// It is errors.ErrUnsupported, the one "not supported" value of every
	// pureverbs package (uverbs.ErrNotSupported is the same).
	ErrNotSupported = errors.ErrUnsupported
	// ErrKernelTooOld: the kernel predates the call (EPIOCSPARAMS needs
	// Linux 6.9, epoll_pwait2 5.11).
	ErrKernelTooOld = errors.New("netpoll: kernel too old")
	// ErrNoBusyPoll: the kernel was built without CONFIG_NET_RX_BUSY_POLL.
	ErrNoBusyPoll = errors.New("netpoll: kernel built without busy polling")
	// ErrNeedCapNetAdmin: the setting needs CAP_NET_ADMIN.
	ErrNeedCapNetAdmin = errors.New("netpoll: needs CAP_NET_ADMIN")

	// ErrClosed: the driver was closed. It is net.ErrClosed, the one
	// "closed" value of every pureverbs package (uverbs.ErrClosed is the
	// same). Errors returned after Close wrap it with what was refused.
	ErrClosed = net.ErrClosed
	// ErrRunning: Run or Poll is already running on this driver.
	ErrRunning = errors.New("netpoll: driver already running")
	// ErrNoSource: no source has that id (never added, or already gone).
	ErrNoSource = errors.New("netpoll: no such source")
	// ErrSendBufferFull: Send would hold back more than Config.SendBuffer
	// bytes for one stream; nothing of that call was taken beyond the
	// count Send returned.
	ErrSendBufferFull = errors.New("netpoll: send buffer full")
)

// BusyPollError is the kernel refusing a busy-poll setting or call, with the
// reason spelled out. It matches ErrKernelTooOld, ErrNoBusyPoll or
// ErrNeedCapNetAdmin as the errno says, ErrNotSupported for the first two,
// and always its Errno.
type BusyPollError struct {
	// Op is the refused operation: "EPIOCSPARAMS", "epoll_pwait2" or a
	// socket option name such as "SO_BUSY_POLL".
	Op    string
	Errno unix.Errno
}

// Error names the operation, the reason in words and the errno.
func (e *BusyPollError) Error() string {
	return "netpoll: " + e.Op + ": " + e.reason() + " (" + e.Errno.Error() + ")"
}

func (e *BusyPollError) reason() string {
	switch e.Errno {
	case unix.ENOTTY:
		return "kernel too old: epoll busy-poll parameters need Linux 6.9 or newer"
	case unix.ENOSYS:
		return "kernel too old: epoll_pwait2 needs Linux 5.11 or newer"
	case unix.EOPNOTSUPP:
		return "kernel built without busy polling (CONFIG_NET_RX_BUSY_POLL)"
	case unix.ENOPROTOOPT:
		return "socket option unknown to this kernel: built without CONFIG_NET_RX_BUSY_POLL, or older than Linux 5.11"
	case unix.EPERM:
		switch e.Op {
		case "EPIOCSPARAMS":
			return "a busy-poll budget above 64 needs CAP_NET_ADMIN"
		case "SO_BUSY_POLL":
			return "raising SO_BUSY_POLL above net.core.busy_read needs CAP_NET_ADMIN on this kernel"
		case "SO_PREFER_BUSY_POLL":
			return "preferring busy polling needs CAP_NET_ADMIN"
		case "SO_BUSY_POLL_BUDGET":
			return "raising the busy-poll budget needs CAP_NET_ADMIN"
		}
		return "needs CAP_NET_ADMIN"
	case unix.EINVAL:
		return "value out of range"
	}
	return "refused"
}

// Unwrap returns the sentinels the errno stands for, and the errno.
func (e *BusyPollError) Unwrap() []error {
	switch e.Errno {
	case unix.ENOTTY, unix.ENOSYS:
		return []error{ErrKernelTooOld, ErrNotSupported, e.Errno}
	case unix.EOPNOTSUPP, unix.ENOPROTOOPT:
		return []error{ErrNoBusyPoll, ErrNotSupported, e.Errno}
	case unix.EPERM:
		return []error{ErrNeedCapNetAdmin, e.Errno}
	}
	return []error{e.Errno}
}

// errClosed is ErrClosed for op.
func errClosed(op string) error { return fmt.Errorf("netpoll: %s: driver closed: %w", op, ErrClosed) }

// busyPollError wraps a non-zero errno from op, or returns nil.
func busyPollError(op string, errno unix.Errno) error {
	if errno == 0 {
		return nil
	}
	return &BusyPollError{Op: op, Errno: errno}
}
