package rxe

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// memfdQueue makes a memfd holding a queue buffer header, standing in for
// the uverbs fd the kernel's rxe_mmap serves.
func memfdQueue(t *testing.T, size int, log2, mask uint32) int {
	t.Helper()
	fd, err := unix.MemfdCreate("rxe-ring", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	var hdr [8]byte
	binary.NativeEndian.PutUint32(hdr[0:], log2)
	binary.NativeEndian.PutUint32(hdr[4:], mask)
	if _, err := unix.Pwrite(fd, hdr[:], 0); err != nil {
		t.Fatal(err)
	}
	return fd
}

// fdMmap maps from fd as Context.Mmap maps from the uverbs fd.
func fdMmap(fd int) mmapFunc {
	return func(offset uint64, length int) ([]byte, error) {
		return unix.Mmap(fd, int64(offset), length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
}

func TestMapRingShared(t *testing.T) {
	fd := memfdQueue(t, 4096, 6, 7) // 8 slots of 64 bytes
	m, r, err := mapRing(fdMmap(fd), mmInfo{offset: 0, size: 384 + 8*64})
	if err != nil {
		t.Fatal(err)
	}
	if r.ElemSize() != 64 || r.Slots() != 8 {
		t.Fatalf("ring geometry %d x %d", r.Slots(), r.ElemSize())
	}
	// MAP_SHARED: what the "kernel" writes through the fd shows up in the
	// ring.
	var idx [4]byte
	binary.NativeEndian.PutUint32(idx[:], 5)
	if _, err := unix.Pwrite(fd, idx[:], 128); err != nil {
		t.Fatal(err)
	}
	if p := r.Producer(); p != 5 {
		t.Fatalf("producer %d, want 5", p)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if m.Bytes() != nil {
		t.Fatal("Bytes after Close")
	}
}

func TestMapRingFailures(t *testing.T) {
	fd := memfdQueue(t, 4096, 6, 127) // 128 slots of 64 bytes: larger than the file maps
	if _, _, err := mapRing(fdMmap(fd), mmInfo{size: 4096}); !errors.Is(err, ErrBadRing) {
		t.Fatalf("short mapping: err = %v, want ErrBadRing", err)
	}
	if _, err := mapMem(fdMmap(-1), 0, 4096); !errors.Is(err, unix.EBADF) {
		t.Fatalf("bad fd: err = %v, want EBADF", err)
	}
	if _, err := mapMem(fdMmap(fd), 0, 0); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("size 0: err = %v, want EINVAL", err)
	}
}
