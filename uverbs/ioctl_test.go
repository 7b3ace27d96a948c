package uverbs

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bytes returns the command as the kernel reads it: header and attributes.
func (b *ioctlBuf) bytes() []byte {
	b.finish()
	return unsafe.Slice((*byte)(unsafe.Pointer(&b.hdr)), b.hdr.Length)
}

// attrBytes encodes one struct ib_uverbs_attr from the C layout:
// u16 attr_id, u16 len, u16 flags, u16 attr_data, u64 data.
func attrBytes(id, length, flags uint16, data uint64) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint16(b[0:], id)
	binary.LittleEndian.PutUint16(b[2:], length)
	binary.LittleEndian.PutUint16(b[4:], flags)
	binary.LittleEndian.PutUint64(b[8:], data)
	return b
}

// hdrBytes encodes struct ib_uverbs_ioctl_hdr: u16 length, object_id,
// method_id, num_attrs; u64 reserved1; u32 driver_id, reserved2.
func hdrBytes(length, object, method, numAttrs uint16, driverID uint32) []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint16(b[0:], length)
	binary.LittleEndian.PutUint16(b[2:], object)
	binary.LittleEndian.PutUint16(b[4:], method)
	binary.LittleEndian.PutUint16(b[6:], numAttrs)
	binary.LittleEndian.PutUint32(b[16:], driverID)
	return b
}

// The GID entry query as libibverbs 44 builds it (_ibv_query_gid_ex): port
// and index as 8-byte const attributes, flags as a 4-byte inline value, the
// entry as an output pointer; every attribute mandatory; the device's driver
// id (RDMA_DRIVER_RXE = 14) in the header.
func TestGoldenQueryGIDEntry(t *testing.T) {
	var e gidEntry
	b := queryGIDEntryCmd(uint32(DriverRXE), 1, 3, &e)
	defer b.pin.Unpin()

	var want []byte
	want = append(want, hdrBytes(24+4*16, 0, 6, 4, 14)...)
	want = append(want, attrBytes(0, 8, 1, 1)...)
	want = append(want, attrBytes(1, 8, 1, 3)...)
	want = append(want, attrBytes(2, 4, 1, 0)...)
	want = append(want, attrBytes(3, 32, 1, uint64(uintptr(unsafe.Pointer(&e))))...)
	expectBytes(t, "query_gid_entry", b.bytes(), want)
}

func TestGoldenQueryGIDTable(t *testing.T) {
	entries := make([]gidEntry, 4)
	var num uint64
	b, numAttr := queryGIDTableCmd(uint32(DriverRXE), entries, &num)
	if numAttr != &b.attrs[3] {
		t.Errorf("count attribute is not the last one")
	}
	defer b.pin.Unpin()

	var want []byte
	want = append(want, hdrBytes(24+4*16, 0, 5, 4, 14)...)
	want = append(want, attrBytes(0, 8, 1, 32)...)
	want = append(want, attrBytes(1, 4, 1, 0)...)
	want = append(want, attrBytes(2, 128, 1, uint64(uintptr(unsafe.Pointer(&entries[0]))))...)
	want = append(want, attrBytes(3, 8, 1, uint64(uintptr(unsafe.Pointer(&num))))...)
	expectBytes(t, "query_gid_table", b.bytes(), want)
}

func TestU32InIsInlineLowBytes(t *testing.T) {
	b := newIoctl(0, 0, 0)
	b.u32In(7, 0xa1b2c3d4)
	got := b.bytes()[24+8 : 24+16]
	if binary.NativeEndian.Uint32(got) != 0xa1b2c3d4 || binary.NativeEndian.Uint32(got[4:]) != 0 {
		t.Errorf("u32 attribute data = %x", got)
	}
}

// Without a driver id the ioctl verbs refuse before the kernel does; an fd
// that is not a uverbs device answers ENOTTY, which reads as "not supported".
func TestGIDQueryErrors(t *testing.T) {
	c, _ := fakeContext(t)
	c.driverIDErr = errors.New("no netlink here")
	if _, err := c.QueryGID(1, 0); !errors.Is(err, ErrNotSupported) {
		t.Errorf("QueryGID without driver id = %v, want ErrNotSupported", err)
	}
	c.driverID = DriverRXE
	_, err := c.QueryGID(1, 0)
	if !errors.Is(err, unix.ENOTTY) || !errors.Is(err, ErrNotSupported) {
		t.Errorf("QueryGID on a memfd = %v, want ENOTTY and ErrNotSupported", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Verb != "query_gid_entry" {
		t.Errorf("QueryGID error %v does not name the verb", err)
	}
	if _, err := c.QueryGID(1, -1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryGID(index -1) = %v, want EINVAL", err)
	}
}

// An output buffer larger than the 16-bit attribute length can say is
// refused before the command is sent (fd -1 would answer EBADF), never cut
// short.
func TestIoctlAttrLengthOverflow(t *testing.T) {
	big := make([]byte, 1<<16)
	c := &Context{fd: -1}
	b := newIoctl(objectDevice, methodQueryGIDTable, uint32(DriverRXE))
	b.ptrOut(attrQueryGIDTableRespEntries, unsafe.Pointer(&big[0]), len(big))
	err := b.exec(c, "query_gid_table")
	if !errors.Is(err, unix.EOVERFLOW) {
		t.Fatalf("exec with a %d-byte attribute: %v, want EOVERFLOW", len(big), err)
	}
	if !strings.Contains(err.Error(), "query_gid_table") {
		t.Errorf("error %q does not name the verb", err)
	}
	ok := newIoctl(objectDevice, methodQueryGIDTable, uint32(DriverRXE))
	ok.ptrOut(attrQueryGIDTableRespEntries, unsafe.Pointer(&big[0]), len(big)-1)
	if err := ok.exec(c, "query_gid_table"); !errors.Is(err, unix.EBADF) {
		t.Fatalf("exec with a %d-byte attribute reached the kernel with %v, want EBADF", len(big)-1, err)
	}
}
