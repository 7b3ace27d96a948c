package uverbs

import (
	"runtime"
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

// writeCmd is the one entry point for write() commands: it sends the n bytes
// at p (command header, request, driver request) on the uverbs fd. The kernel
// answers in place through the response pointers inside the request, so p
// and everything it points to must stay alive and unmoved until the call
// returns (the assembly Syscall guarantees that for p; ptr64 fields are
// GC-visible). A successful command returns its full length.
// hot selects RawSyscall (see fullIO).
func writeCmd(fd int, verb string, p unsafe.Pointer, n uintptr, hot bool) error {
	// The kernel never writes a command partially; a short count (EIO
	// from fullIO) means fd is not a uverbs device.
	if errno := fullIO(unix.SYS_WRITE, fd, p, n, hot); errno != 0 {
		return cmdError(verb, errno)
	}
	return nil
}

// ioctlCmd is the one entry point for RDMA_VERBS_IOCTL: hdr points at a
// struct ib_uverbs_ioctl_hdr followed by its attributes. Pointers inside the
// attributes are the caller's to keep alive and pinned (see ioctlBuf).
func ioctlCmd(fd int, verb string, hdr unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), rdmaVerbsIoctl, uintptr(hdr))
		runtime.KeepAlive(hdr)
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
// (completion channel or async event fd), retrying EINTR. It returns the raw
// errno so that callers can keep EAGAIN allocation-free.
func readEvent(fd int, p unsafe.Pointer, n uintptr) unix.Errno {
	return fullIO(unix.SYS_READ, fd, p, n, true) // both event fds are non-blocking
}

// fullIO is read(2) or write(2) (trap) of exactly n bytes at p, retrying
// EINTR; any other count is EIO, since uverbs fds transfer whole commands
// and events or nothing.
//
// With hot set it uses RawSyscall, which skips the scheduler's
// entersyscall/exitsyscall. That is only for calls that return in
// microseconds and never sleep in the kernel: the send doorbell (rxe runs
// its requester inline), req_notify_cq and reads of the non-blocking event
// fds. In the VM it took a 64-byte rc-pingpong iteration from 245 to 164 us
// (C: 148). Commands that may sleep (create, destroy) keep Syscall, so the
// runtime can hand their P to other goroutines and a stop-the-world does
// not wait on them.
func fullIO(trap uintptr, fd int, p unsafe.Pointer, n uintptr, hot bool) unix.Errno {
	syscall := unix.Syscall
	if hot {
		syscall = unix.RawSyscall
	}
	for {
		r, _, errno := syscall(trap, uintptr(fd), uintptr(p), n)
		runtime.KeepAlive(p)
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return errno
		case r != n:
			return unix.EIO
		}
		return 0
	}
}
