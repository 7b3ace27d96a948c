package uverbs

import (
	"fmt"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// fileDesc is a file descriptor with exactly one owner (a Context's command
// and async fds, a completion channel's fd). It closes the descriptor once:
// close is idempotent, and a fileDesc dropped without close has its
// descriptor closed by a GC cleanup. Code that passes the number to a
// system call keeps the owner reachable until the call returns
// (runtime.KeepAlive), so the cleanup can never close it, and the number be
// reused, mid-call.
type fileDesc struct {
	raw    int
	closed atomic.Bool
	watch  leakcheck.Watch
}

// ownFD takes ownership of raw; what says what it is, for the leak check.
func ownFD(raw int, what string) *fileDesc {
	f := &fileDesc{raw: raw}
	f.watch = leakcheck.Object(f, fmt.Sprintf("%s %d", what, raw), func(raw int) { unix.Close(raw) }, raw)
	return f
}

// int is the descriptor number, -1 for none (a nil fileDesc) or once
// closed. It is on the doorbell path: a load, no lock (the owners' gates
// keep close from running during a command).
func (f *fileDesc) int() int {
	if f == nil {
		return -1
	}
	if f.closed.Load() {
		return -1
	}
	return f.raw
}

// close closes the descriptor the first time it is called. The descriptor
// is released even when close(2) reports an error, so it never retries.
func (f *fileDesc) close() error {
	if f == nil {
		return nil
	}
	if !f.closed.CompareAndSwap(false, true) {
		return nil
	}
	f.watch.Closed()
	return unix.Close(f.raw)
}
