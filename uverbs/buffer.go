package uverbs

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

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
// sees nor moves it. Register it with PD.RegisterMR; Close unmaps it.
//
// A Buffer dropped without Close is unmapped by a GC cleanup (a safety net,
// not a substitute for Close). Memory regions hold their Buffer, so that
// happens only once no MR of it is reachable either.
type Buffer struct {
	mem     []byte // the whole mapping, as Mmap returned it
	size    int    // bytes asked for
	cleanup runtime.Cleanup

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
	b.cleanup = runtime.AddCleanup(b, func(mem []byte) { unix.Munmap(mem) }, mem)
	return b, nil
}

// Bytes returns the buffer's memory (Len bytes), nil after Close. The slice
// must not be used after Close.
func (b *Buffer) Bytes() []byte {
	if b.mem == nil {
		return nil
	}
	return b.mem[:b.size:b.size]
}

// Addr returns the buffer's start address, the address memory regions and
// work requests use.
func (b *Buffer) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b.mem)))) }

// Len returns the size asked for.
func (b *Buffer) Len() int { return b.size }

// MappedLen returns the size of the mapping (Len rounded up to the page
// size).
func (b *Buffer) MappedLen() int { return len(b.mem) }

// Close unmaps the buffer. It refuses while memory regions registered on the
// buffer are open, since the device may still access the memory. Close is
// idempotent.
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil
	}
	if n := b.regs; n != 0 {
		return fmt.Errorf("uverbs: buffer still registered by %d memory regions: %w", n, unix.EBUSY)
	}
	b.cleanup.Stop()
	if err := unix.Munmap(b.mem); err != nil {
		return fmt.Errorf("uverbs: munmap: %w", err)
	}
	b.mem = nil
	return nil
}

// register counts a memory region on b; it fails once b is closed.
func (b *Buffer) register() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
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
