package ucma

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ptr64 is a __aligned_u64 that carries a pointer to the kernel (a
// command's response or option buffer). Holding it as unsafe.Pointer keeps
// the pointee visible to the garbage collector until the command returns.
type ptr64 struct{ p unsafe.Pointer }

// The ABI passes pointers in 64-bit fields; ptr64 only matches that where
// pointers are 64 bits wide.
var _ = [1]struct{}{}[unsafe.Sizeof(ptr64{})-8]

// fullIO writes the n bytes at p to fd (one command), retrying on EINTR,
// and returns the errno; a short count, which the rdma_cm device never
// produces, is EIO. The pointer conversion stays in the Syscall's argument
// list: only that form keeps *p alive and in place during the call.
func fullIO(fd int, p unsafe.Pointer, n uintptr) unix.Errno {
	for {
		r, _, errno := unix.Syscall(unix.SYS_WRITE, uintptr(fd), uintptr(p), n)
		if errno == unix.EINTR {
			continue
		}
		if errno == 0 && r != n {
			return unix.EIO
		}
		return errno
	}
}

// be64 reads v, a big-endian field the kernel copied as it is, as a number.
func be64(v uint64) uint64 {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
