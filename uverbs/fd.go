package uverbs

import (
	"runtime"
	"sync/atomic"

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
	raw     int
	closed  atomic.Bool
	cleanup runtime.Cleanup
}

// ownFD takes ownership of raw.
func ownFD(raw int) *fileDesc {
	f := &fileDesc{raw: raw}
	f.cleanup = runtime.AddCleanup(f, func(raw int) { unix.Close(raw) }, raw)
	return f
}

// int is the descriptor number, -1 for none (a nil fileDesc) or once
// closed. It is on the doorbell path: a load, no lock (closing concurrently
// with a command is excluded by the owners' contracts).
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
	f.cleanup.Stop()
	return unix.Close(f.raw)
}
