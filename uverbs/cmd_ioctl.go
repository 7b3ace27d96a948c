package uverbs

import (
	"encoding/binary"
	"runtime"
	"unsafe"
)

// maxIoctlAttrs bounds the attributes of one ioctl command built here.
const maxIoctlAttrs = 8

// ioctlBuf assembles one RDMA_VERBS_IOCTL command. The header and the
// attribute array are contiguous, as the kernel reads them; buffers the
// attributes point at are pinned until done is called, so their addresses
// stay valid while the kernel uses them.
type ioctlBuf struct {
	hdr   ioctlHdr
	attrs [maxIoctlAttrs]ioctlAttr
	pin   runtime.Pinner
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

// ptrOut adds a PTR_OUT buffer of n bytes at p; p is pinned until done.
func (b *ioctlBuf) ptrOut(id uint16, p unsafe.Pointer, n int) *ioctlAttr {
	b.pin.Pin(p)
	a := b.next(id)
	a.Len = uint16(n)
	a.Data = uint64(uintptr(p))
	return a
}

// finish fixes the header length; the kernel requires it to match num_attrs.
func (b *ioctlBuf) finish() {
	b.hdr.Length = uint16(unsafe.Sizeof(b.hdr) + uintptr(b.hdr.NumAttrs)*unsafe.Sizeof(b.attrs[0]))
}

// exec runs the command on fd and unpins its buffers.
func (b *ioctlBuf) exec(fd int, verb string) error {
	defer b.pin.Unpin()
	b.finish()
	return ioctlCmd(fd, verb, unsafe.Pointer(&b.hdr))
}
