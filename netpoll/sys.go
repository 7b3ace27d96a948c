//go:build linux

package netpoll

// The raw layer: every syscall netpoll makes on its hot paths, and the only
// file in the package that uses unsafe. The wrappers return unix.Errno rather
// than error so the receive loop can branch on EAGAIN without an interface
// conversion; callers wrap the errno when it becomes an error.

import (
	"net/netip"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epollParams is struct epoll_params from <linux/eventpoll.h> (Linux 6.9+),
// the argument of EPIOCSPARAMS/EPIOCGPARAMS. x/sys/unix has the ioctl
// numbers but not the struct.
type epollParams struct {
	BusyPollUsecs  uint32
	BusyPollBudget uint16
	PreferBusyPoll uint8
	pad            uint8 // must be zero: the kernel answers EINVAL otherwise
}

// setEpollParams configures busy polling on an epoll instance.
func setEpollParams(epfd int, p *epollParams) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(epfd), unix.EPIOCSPARAMS, uintptr(unsafe.Pointer(p)))
	runtime.KeepAlive(p)
	return e
}

// epollWaitNow is epoll_wait with a zero timeout: it never sleeps, so the
// scheduler need not be told (RawSyscall). arm64 has no epoll_wait, so both
// architectures use epoll_pwait with no signal mask.
func epollWaitNow(epfd int, events []unix.EpollEvent) (int, unix.Errno) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd),
		uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)), 0, 0, 0)
	return int(n), e
}

// epollPwait2 waits up to ts (nil: without limit) with microsecond
// resolution (Linux 5.11+). It may sleep, so it goes through the scheduler.
func epollPwait2(epfd int, events []unix.EpollEvent, ts *unix.Timespec) (int, unix.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(epfd),
		uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)),
		uintptr(unsafe.Pointer(ts)), 0, 0)
	runtime.KeepAlive(ts)
	return int(n), e
}

// epollCtlMod changes the events epoll reports for fd. It cannot fail for
// a descriptor in the set, so its errno is not returned.
func epollCtlMod(epfd, fd int, ev *unix.EpollEvent) {
	unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), unix.EPOLL_CTL_MOD, uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	runtime.KeepAlive(ev)
}

// recvBuf is the receive state one driver reuses for every read: the data
// buffer and a msghdr whose name and iovec point into this struct, so a read
// allocates nothing. It must stay on the heap (it points at itself).
type recvBuf struct {
	buf  []byte
	iov  unix.Iovec
	name unix.RawSockaddrAny
	msg  unix.Msghdr
}

func newRecvBuf(size int) *recvBuf {
	r := &recvBuf{buf: make([]byte, size)}
	r.iov.Base = unsafe.SliceData(r.buf)
	r.iov.SetLen(size)
	r.msg.Name = (*byte)(unsafe.Pointer(&r.name))
	r.msg.Iov = &r.iov
	r.msg.SetIovlen(1)
	return r
}

// recv reads one datagram (or one chunk of a stream) without blocking.
func (r *recvBuf) recv(fd int) (int, unix.Errno) {
	r.msg.Namelen = unix.SizeofSockaddrAny
	r.msg.Flags = 0
	n, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&r.msg)), unix.MSG_DONTWAIT)
	return int(n), e
}

// from decodes the source address of the last datagram. The IPv6 zone is
// dropped: a zone is a string, and building it would allocate.
func (r *recvBuf) from() netip.AddrPort {
	if r.msg.Namelen == 0 {
		return netip.AddrPort{}
	}
	switch r.name.Addr.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.name))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), netToHost(sa.Port))
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&r.name))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), netToHost(sa.Port))
	}
	return netip.AddrPort{}
}

// netToHost turns a port as stored in a sockaddr (network byte order in
// memory) into a number.
func netToHost(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}

// hostToNet is the inverse of netToHost.
func hostToNet(p uint16) uint16 {
	var v uint16
	b := (*[2]byte)(unsafe.Pointer(&v))
	b[0], b[1] = byte(p>>8), byte(p)
	return v
}

// sendTo sends p without blocking, to addr if it is valid (a datagram
// socket of the given family) or on the connected socket otherwise. Each
// call converts its pointers to uintptr inside the syscall's argument list:
// a uintptr kept in a variable would go stale if p's array lived on a stack
// that moved before the call.
func sendTo(fd, family int, p []byte, addr netip.AddrPort) (int, unix.Errno) {
	const flags = unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL
	var n uintptr
	var e unix.Errno
	switch ip := addr.Addr().Unmap(); {
	case !addr.IsValid():
		n, _, e = unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd),
			uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), flags, 0, 0)
	case family == unix.AF_INET6:
		sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: hostToNet(addr.Port()), Addr: addr.Addr().As16()}
		n, _, e = unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd),
			uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), flags,
			uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet6)
	case ip.Is4():
		sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Port: hostToNet(addr.Port()), Addr: ip.As4()}
		n, _, e = unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd),
			uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), flags,
			uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet4)
	default:
		return 0, unix.EAFNOSUPPORT
	}
	runtime.KeepAlive(p)
	return int(n), e
}

// incomingNAPIID is the NAPI id of the queue the socket's last packet came
// in on: 0 until a packet arrived through a NAPI instance with an id.
func incomingNAPIID(fd int) uint32 {
	v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
	if err != nil {
		return 0
	}
	return uint32(v)
}

// eventfd is a non-blocking counter used to wake a sleeping loop. mu
// orders signal against close: a late signal must not write to a number
// the process has reused.
type eventfd struct {
	mu  sync.Mutex
	fd  int // -1 once closed
	one [8]byte
	tmp [8]byte
}

func newEventfd() (*eventfd, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	e := &eventfd{fd: fd}
	*(*uint64)(unsafe.Pointer(&e.one)) = 1
	return e, nil
}

// signal adds one; a full counter (EAGAIN) is already readable, so errors
// change nothing and are ignored.
func (e *eventfd) signal() {
	e.mu.Lock()
	if e.fd >= 0 {
		unix.RawSyscall(unix.SYS_WRITE, uintptr(e.fd), uintptr(unsafe.Pointer(&e.one)), 8)
	}
	e.mu.Unlock()
}

func (e *eventfd) close() {
	e.mu.Lock()
	if e.fd >= 0 {
		unix.Close(e.fd)
		e.fd = -1
	}
	e.mu.Unlock()
}

// reset reads the counter back to zero; only the loop calls it, never
// after close.
func (e *eventfd) reset() {
	unix.RawSyscall(unix.SYS_READ, uintptr(e.fd), uintptr(unsafe.Pointer(&e.tmp)), 8)
}
