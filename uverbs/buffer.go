package uverbs

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// hugePageSize is the default huge page size MAP_HUGETLB uses on amd64 and
// arm64 (4 KiB base pages).
const hugePageSize = 2 << 20

// ErrNoHugePages is returned (wrapped) by NewBuffer when huge pages were
// asked for and the kernel has none free.
var ErrNoHugePages = errors.New("uverbs: no free huge pages (reserve some: sysctl vm.nr_hugepages)")

// BufferOptions tunes NewBuffer.
type BufferOptions struct {
	// HugePages backs the buffer with 2 MiB huge pages (MAP_HUGETLB); the
	// size is rounded up to a multiple of 2 MiB.
	HugePages bool
}

// Buffer is off-heap memory for RDMA: an anonymous private mapping, page
// aligned, excluded from fork (MADV_DONTFORK, so a child's copy-on-write
// never moves pages the device writes to). The Go garbage collector neither
// sees nor moves it. Register it with PD.RegisterMR; Close releases it.
//
// The memory outlives every slice Bytes returned until Close: a Buffer
// dropped without Close is never unmapped behind its slices (the garbage
// collector cannot see them: they point outside its heap). Its mapping is
// leaked instead, and the leak check (package leakcheck) reports the
// Buffer and where it was created. After Close the slices must not be
// used.
type Buffer struct {
	mem    []byte // the whole mapping, as Mmap returned it; never changed
	size   int    // bytes asked for
	watch  leakcheck.Watch
	closed atomic.Bool // set by Close before it releases the memory

	mu   sync.Mutex
	regs int // live memory regions on this buffer
}

// NewBuffer maps size bytes (rounded up to the page size) of zeroed memory.
func NewBuffer(size int, opts BufferOptions) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("uverbs: buffer size %d: %w", size, unix.EINVAL)
	}
	page := unix.Getpagesize()
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if opts.HugePages {
		page = hugePageSize
		flags |= unix.MAP_HUGETLB
	}
	mapped := (size + page - 1) / page * page
	if mapped < size {
		return nil, fmt.Errorf("uverbs: buffer size %d: %w", size, unix.EINVAL)
	}
	mem, err := unix.Mmap(-1, 0, mapped, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		if opts.HugePages && errors.Is(err, unix.ENOMEM) {
			return nil, fmt.Errorf("uverbs: mmap %d bytes of huge pages: %w (%w)", mapped, ErrNoHugePages, err)
		}
		return nil, fmt.Errorf("uverbs: mmap %d bytes: %w", mapped, err)
	}
	if err := unix.Madvise(mem, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("uverbs: madvise(MADV_DONTFORK): %w", err)
	}
	b := &Buffer{mem: mem, size: size}
	b.watch = leakcheck.Object(b, fmt.Sprintf("uverbs.Buffer of %d bytes (its mapping stays)", size), nil, struct{}{})
	return b, nil
}

// Bytes returns the buffer's memory (Len bytes), nil after Close. The slice
// stays valid until Close, whether or not the Buffer is still referenced,
// and must not be used after Close.
func (b *Buffer) Bytes() []byte {
	if b.closed.Load() {
		return nil
	}
	return b.mem[:b.size:b.size]
}

// Addr returns the buffer's start address, the address memory regions and
// work requests use; 0 after Close.
func (b *Buffer) Addr() uint64 {
	if b.closed.Load() {
		return 0
	}
	return mappedAddr(b.mem)
}

// Len returns the size asked for.
func (b *Buffer) Len() int { return b.size }

// MappedLen returns the size of the mapping (Len rounded up to the page
// size).
func (b *Buffer) MappedLen() int { return len(b.mem) }

// Close releases the buffer's memory. It refuses while memory regions
// registered on the buffer are open, since the device may still access the
// memory. Close is idempotent.
//
// The memory goes at once: the range is remapped in place to read-only
// zero pages, which hold no memory. The address range itself is unmapped
// once the Buffer is unreachable, so that a LoadByte racing with Close
// (it holds the Buffer) reads 0 rather than faulting on an unmapped page.
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return nil
	}
	if n := b.regs; n != 0 {
		return fmt.Errorf("uverbs: buffer still registered by %d memory regions: %w", n, unix.EBUSY)
	}
	b.closed.Store(true)
	b.watch.Closed()
	runtime.AddCleanup(b, func(mem []byte) { unix.Munmap(mem) }, b.mem)
	if _, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(b.mem)), uintptr(len(b.mem)), unix.PROT_READ,
		unix.MAP_FIXED|unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE); err != nil {
		// The range is as it was; the cleanup still unmaps it.
		return fmt.Errorf("uverbs: mmap over the closed buffer: %w", err)
	}
	return nil
}

// register counts a memory region on b; it fails once b is closed.
func (b *Buffer) register() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return fmt.Errorf("uverbs: buffer: %w", ErrClosed)
	}
	b.regs++
	return nil
}

func (b *Buffer) unregister() {
	b.mu.Lock()
	b.regs--
	b.mu.Unlock()
}

// mappedAddr is the address of memory outside the Go heap (a mapping), as
// the kernel takes it. The garbage collector neither moves nor frees such
// memory, so the integer stays valid as long as the mapping: the one
// sanctioned conversion of a pointer into an integer for memory not pinned
// by a runtime.Pinner (see TestUnsafeAddressesSanctioned).
func mappedAddr(mem []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))) }
