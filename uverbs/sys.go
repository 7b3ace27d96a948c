package uverbs

import (
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ptr64 is an __aligned_u64 that the kernel dereferences as a user pointer
// (the "response" fields). It holds an unsafe.Pointer so that the garbage
// collector sees it: the pointee stays alive, and if it lives on a goroutine
// stack that is copied, the field is updated with it.
type ptr64 struct{ p unsafe.Pointer }

// The kernel ABI passes pointers in 64-bit fields; ptr64 only matches that
// where pointers are 64 bits wide.
var _ = [1]struct{}{}[unsafe.Sizeof(ptr64{})-8]

// writeCmd is the entry point for write() commands other than hotWrite's:
// it sends the n bytes at p (command header, request, driver request) on
// the uverbs fd, holding the Context's gate (ErrClosed once Close has begun). The kernel
// answers in place through the response pointers inside the request, so p
// and everything it points to must stay alive and unmoved until the call
// returns (the assembly Syscall guarantees that for p; ptr64 fields are
// GC-visible). A successful command returns its full length.
func writeCmd(c *Context, verb string, p unsafe.Pointer, n uintptr) error {
	if !c.gate.enter() {
		return closedError(verb)
	}
	// The kernel never writes a command partially; a short count (EIO
	// from fullIO) means fd is not a uverbs device.
	errno := fullIO(c.fd.int(), p, n, false)
	c.gate.leave()
	// The Context owns the fd and its GC cleanup closes it: it must stay
	// reachable until the kernel is done with the command, or the fd could
	// be closed (and reused) under it.
	runtime.KeepAlive(c)
	if errno != 0 {
		return cmdError(verb, errno)
	}
	return nil
}

// ioctlCmd is the one entry point for RDMA_VERBS_IOCTL: hdr points at a
// struct ib_uverbs_ioctl_hdr followed by its attributes. Pointers inside the
// attributes are the caller's to keep alive and pinned (see ioctlBuf).
func ioctlCmd(c *Context, verb string, hdr unsafe.Pointer) error {
	defer runtime.KeepAlive(c) // see writeCmd
	if !c.gate.enter() {
		return closedError(verb)
	}
	defer c.gate.leave()
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(c.fd.int()), rdmaVerbsIoctl, uintptr(hdr))
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return cmdError(verb, errno)
	}
}

// readEvent reads one event descriptor of size n into p from an event fd
// (completion channel or async event fd), retrying EINTR. Both event fds are
// non-blocking, so the read never sleeps in the kernel and goes through
// RawSyscall (see fullIO). It returns the raw errno so that callers can keep
// EAGAIN allocation-free.
func readEvent(fd int, p unsafe.Pointer, n uintptr) unix.Errno {
	for {
		r, _, errno := syscall.RawSyscall6(unix.SYS_READ, uintptr(fd), uintptr(p), n, 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		return wholeTransfer(r, n, errno)
	}
}

// fullIO is write(2) of exactly n bytes at p, retrying EINTR; any other
// count is EIO, since uverbs fds take whole commands or nothing.
//
// Each branch is a direct call with the pointer conversion in its argument
// list: only that form keeps *p alive and in place during the call (a frame
// on a goroutine stack may otherwise move), so the syscall function is never
// chosen through a variable.
//
// With hot set it uses RawSyscall, which skips the scheduler's
// entersyscall/exitsyscall. That is only for calls that return in
// microseconds and never sleep in the kernel: the send doorbell (rxe runs
// its requester inline) and req_notify_cq. In the VM it took a 64-byte
// rc-pingpong iteration from 245 to 164 us (C: 148). Commands that may
// sleep (create, destroy) keep Syscall, so the runtime can hand their P to
// other goroutines and a stop-the-world does not wait on them.
//
// The raw calls go to syscall.RawSyscall6 itself: x/sys/unix's RawSyscall
// is an assembly jump to syscall's, through an ABI wrapper and one more
// frame, 40 instructions a call on a path of a few hundred.
func fullIO(fd int, p unsafe.Pointer, n uintptr, hot bool) unix.Errno {
	for {
		var r uintptr
		var errno unix.Errno
		if hot {
			r, _, errno = syscall.RawSyscall6(unix.SYS_WRITE, uintptr(fd), uintptr(p), n, 0, 0, 0)
		} else {
			r, _, errno = unix.Syscall(unix.SYS_WRITE, uintptr(fd), uintptr(p), n)
		}
		if errno == unix.EINTR {
			continue
		}
		return wholeTransfer(r, n, errno)
	}
}

// wholeTransfer turns a read/write result into an errno: EIO for a short
// count, which a uverbs fd never produces.
func wholeTransfer(r, n uintptr, errno unix.Errno) unix.Errno {
	if errno == 0 && r != n {
		return unix.EIO
	}
	return errno
}
