package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxIoctlAttrs bounds the attributes of one ioctl command built here.
const maxIoctlAttrs = 12

// ioctlBuf assembles one RDMA_VERBS_IOCTL command. The header and the
// attribute array are contiguous, as the kernel reads them; buffers the
// attributes point at are pinned until done is called, so their addresses
// stay valid while the kernel uses them.
type ioctlBuf struct {
	hdr   ioctlHdr
	attrs [maxIoctlAttrs]ioctlAttr
	pin   runtime.Pinner
	err   error // the first attribute that could not be encoded
}

func newIoctl(object, method uint16, driverID uint32) *ioctlBuf {
	return &ioctlBuf{hdr: ioctlHdr{ObjectID: object, MethodID: method, DriverID: driverID}}
}

func (b *ioctlBuf) next(id uint16) *ioctlAttr {
	a := &b.attrs[b.hdr.NumAttrs] // panics past maxIoctlAttrs: a bug here, not a runtime condition
	b.hdr.NumAttrs++
	*a = ioctlAttr{AttrID: id, Flags: attrFMandatory}
	return a
}

// constIn adds a UVERBS_ATTR_CONST_IN / 8-byte PTR_IN value, passed inline.
func (b *ioctlBuf) constIn(id uint16, v uint64) {
	a := b.next(id)
	a.Len = 8
	a.Data = v
}

// u32In adds a 4-byte PTR_IN value (e.g. UVERBS_ATTR_FLAGS_IN u32), passed
// inline in the first four bytes of data like libibverbs' fill_attr_in_uint32.
func (b *ioctlBuf) u32In(id uint16, v uint32) {
	a := b.next(id)
	a.Len = 4
	var d [8]byte
	binary.NativeEndian.PutUint32(d[:], v)
	a.Data = binary.NativeEndian.Uint64(d[:])
}

// u64In adds an 8-byte PTR_IN value passed inline (fill_attr_in_uint64);
// the encoding is that of constIn.
func (b *ioctlBuf) u64In(id uint16, v uint64) { b.constIn(id, v) }

// objIn adds a UVERBS_ATTR_TYPE_IDR attribute: no length, the handle inline
// (fill_attr_in_obj). For an object the method creates, handle is 0 and the
// kernel writes the new handle back into Data.
func (b *ioctlBuf) objIn(id uint16, handle uint32) *ioctlAttr {
	a := b.next(id)
	a.Data = uint64(handle)
	return a
}

// fdIn adds a UVERBS_ATTR_TYPE_FD attribute, the fd inline (fill_attr_in_fd).
func (b *ioctlBuf) fdIn(id uint16, fd int) *ioctlAttr {
	a := b.next(id)
	a.Data = uint64(fd)
	return a
}

// ptrOut adds a PTR_OUT buffer of n bytes at p; p is pinned until done.
func (b *ioctlBuf) ptrOut(id uint16, p unsafe.Pointer, n int) *ioctlAttr {
	a := b.next(id)
	if n < 0 || n > math.MaxUint16 {
		// The length field is 16 bits: a larger buffer would be
		// silently cut short, and the kernel would write less than
		// the caller reads.
		if b.err == nil {
			b.err = fmt.Errorf("attribute %d: %d bytes do not fit the 16-bit length: %w", id, n, unix.EOVERFLOW)
		}
		return a
	}
	b.pin.Pin(p)
	a.Len = uint16(n)
	a.Data = uint64(uintptr(p))
	return a
}

// ptrIn adds a PTR_IN buffer of n bytes at p, longer than the 8 bytes
// passed inline (fill_attr_in); p is pinned until done.
func (b *ioctlBuf) ptrIn(id uint16, p unsafe.Pointer, n int) *ioctlAttr {
	return b.ptrOut(id, p, n) // the same encoding: length and address
}

// finish fixes the header length; the kernel requires it to match num_attrs.
func (b *ioctlBuf) finish() {
	b.hdr.Length = uint16(unsafe.Sizeof(b.hdr) + uintptr(b.hdr.NumAttrs)*unsafe.Sizeof(b.attrs[0]))
}

// exec runs the command on fd and unpins its buffers.
func (b *ioctlBuf) exec(c *Context, verb string) error {
	defer b.pin.Unpin()
	if b.err != nil {
		return fmt.Errorf("uverbs: %s: %w", verb, b.err)
	}
	b.finish()
	return ioctlCmd(c, verb, unsafe.Pointer(&b.hdr))
}

// ioctlMethod is one ioctl method that has a write() command to fall back
// on, as a bit of Context.noIoctl.
type ioctlMethod uint32

const (
	ioctlDestroyCQ ioctlMethod = 1 << iota
	ioctlDestroyQP
	ioctlDeregMR
	ioctlDeallocPD
	ioctlCreateCQ
	ioctlCreateQP
	ioctlQueryGIDTable
	ioctlQueryGIDEntry
	ioctlQueryPort
	ioctlCreateSRQ
	ioctlDestroySRQ
)

// tryIoctl sends the ioctl build makes for method m, as libibverbs 44 does,
// and reports whether that settled the verb (err is then its answer). It
// returns false when the caller is to send the write() command instead
// (see ioctlDriver and ioctlFallback).
func (c *Context) tryIoctl(m ioctlMethod, verb string, build func(driverID uint32) *ioctlBuf) (bool, error) {
	driverID, ok := c.ioctlDriver(m)
	if !ok {
		return false, nil
	}
	err := build(driverID).exec(c, verb)
	if err != nil && c.ioctlFallback(err, m) {
		return false, nil
	}
	return true, err
}

// ioctlDriver returns the driver id to send m with, or false when the
// write() command is to be used instead: the kernel refuses a wrong driver
// id with EINVAL, so without a known one the ioctl is not tried, and a
// method the kernel said it lacks is not tried again.
func (c *Context) ioctlDriver(m ioctlMethod) (uint32, bool) {
	if c.driverID == DriverUnknown || c.noIoctl.Load()&uint32(m) != 0 {
		return 0, false
	}
	return uint32(c.driverID), true
}

// ioctlFallback reports whether err, the failure of m's ioctl, means the
// kernel lacks the method, so that the write() command is to be sent; it
// remembers the answer for the Context, as libibverbs'
// _execute_ioctl_fallback does. ENOTTY says the fd has no ioctl interface at
// all, EPROTONOSUPPORT that the kernel does not know the method or one of
// its mandatory attributes (uverbs_ioctl.c returns it for nothing else).
// Every other errno is the verb's real answer.
func (c *Context) ioctlFallback(err error, m ioctlMethod) bool {
	switch {
	case errors.Is(err, unix.ENOTTY):
		c.noIoctl.Store(^uint32(0))
		return true
	case errors.Is(err, unix.EPROTONOSUPPORT):
		c.noIoctl.Or(uint32(m))
		return true
	}
	return false
}
