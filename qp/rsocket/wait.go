package rsocket

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// completionWaiter parks a goroutine in Go's netpoller until the
// connection's completion channel fd becomes readable, a deadline passes or
// the waiter is closed. Each direction (Read, Write) has its own, on its own
// duplicate of the channel fd, so that the two deadlines are independent and
// one event wakes both: the netpoller registers each duplicate and the
// kernel's wake-up reaches every registration. This is the package's only
// use of the completion channel's fd.
type completionWaiter struct {
	f  *os.File
	rc syscall.RawConn
}

func newCompletionWaiter(channelFD int) (*completionWaiter, error) {
	fd, err := unix.FcntlInt(uintptr(channelFD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("rsocket: dup completion channel: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rsocket: completion channel non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(fd), "rsocket-completions")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("rsocket: completion channel: %w", err)
	}
	return &completionWaiter{f: f, rc: rc}, nil
}

// wait calls ready whenever the fd may have become readable (and once at
// first) until it returns true. It returns os.ErrDeadlineExceeded (wrapped
// by the poller) when the deadline passes first, or an error once the
// waiter is closed. ready must not block.
func (w *completionWaiter) wait(ready func(fd uintptr) bool) error {
	return w.rc.Read(ready)
}

// setDeadline sets the time at which a wait gives up; zero means never.
// It applies to a wait already in progress.
func (w *completionWaiter) setDeadline(t time.Time) error {
	return w.f.SetReadDeadline(t)
}

// close wakes a wait in progress and releases the duplicate fd.
func (w *completionWaiter) close() error { return w.f.Close() }
