package uverbs

import (
	"encoding/binary"
	"errors"
	"io/fs"
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

// gidTree writes fake0's GID table into a fake sysfs: a RoCE v2 GID at 1 on
// veth0 (ifindex 3), a RoCE v1 one at 0, slot 2 empty (zeros, no type or
// netdev file), as the kernel shows them.
func gidTree(t *testing.T) string {
	f := newFakeSysfs(t, "")
	d := "class/infiniband/fake0/ports/1/"
	f.write(d+"link_layer", "Ethernet\n")
	f.write(d+"gids/0", "fe80:0000:0000:0000:3870:7aff:fee0:be33\n")
	f.write(d+"gid_attrs/types/0", "IB/RoCE v1\n")
	f.write(d+"gid_attrs/ndevs/0", "veth0\n")
	f.write(d+"gids/1", "0000:0000:0000:0000:0000:ffff:0a63:0001\n")
	f.write(d+"gid_attrs/types/1", "RoCE v2\n")
	f.write(d+"gid_attrs/ndevs/1", "veth0\n")
	f.write(d+"gids/2", "0000:0000:0000:0000:0000:0000:0000:0000\n")
	f.write("class/net/veth0/ifindex", "3\n")
	return f.root
}

// Without a driver id, and when the ioctl answers ENOTTY (a memfd, as a
// kernel without the ioctl interface), GID queries read sysfs as
// libibverbs does.
func TestGIDQuerySysfsFallback(t *testing.T) {
	v1 := GIDEntry{GID: GID{0: 0xfe, 1: 0x80, 8: 0x38, 9: 0x70, 10: 0x7a, 11: 0xff, 12: 0xfe, 13: 0xe0, 14: 0xbe, 15: 0x33}, Index: 0, Port: 1, Type: GIDTypeRoCEv1, NetdevIndex: 3}
	v2 := GIDEntry{GID: GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 15: 1}, Index: 1, Port: 1, Type: GIDTypeRoCEv2, NetdevIndex: 3}
	for _, id := range []DriverID{DriverUnknown, DriverRXE} {
		c, _ := fakeContext(t)
		c.sysfs = gidTree(t)
		c.driverID = id
		e, err := c.QueryGID(1, 1)
		if err != nil || e != v2 {
			t.Errorf("driver %v: QueryGID(1, 1) = %+v, %v; want %+v", id, e, err, v2)
		}
		if _, err := c.QueryGID(1, 2); !errors.Is(err, ErrGIDUnused) {
			t.Errorf("driver %v: QueryGID(1, 2) = %v, want ErrGIDUnused", id, err)
		}
		if _, err := c.QueryGID(1, 9); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "query_gid_entry") {
			t.Errorf("driver %v: QueryGID(1, 9) = %v, want a query_gid_entry error wrapping ErrNotExist", id, err)
		}
		tab, err := c.QueryGIDTable()
		if err != nil || len(tab) != 2 || tab[0] != v1 || tab[1] != v2 {
			t.Errorf("driver %v: QueryGIDTable = %+v, %v; want [%+v %+v]", id, tab, err, v1, v2)
		}
		if id == DriverRXE && c.noIoctl.Load() != ^uint32(0) {
			t.Errorf("after ENOTTY noIoctl = %#x, want every method", c.noIoctl.Load())
		}
	}
	if _, err := (&Context{}).QueryGID(1, -1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("QueryGID(index -1) = %v, want EINVAL", err)
	}
}

func TestParseSysfsGID(t *testing.T) {
	for _, in := range []string{"", "fe80::1", "0000:0000:0000:0000:0000:ffff:0a63", "0000:0000:0000:0000:0000:ffff:0a63:000g", "00000:000:0000:0000:0000:ffff:0a63:0001"} {
		if _, err := parseSysfsGID(in); err == nil {
			t.Errorf("parseSysfsGID(%q) succeeded", in)
		}
	}
}

// An output buffer larger than the 16-bit attribute length can say is
// refused before the command is sent (fd -1 would answer EBADF), never cut
// short.
func TestIoctlAttrLengthOverflow(t *testing.T) {
	big := make([]byte, 1<<16)
	c := &Context{fd: &fileDesc{raw: -1}}
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
