package rxe

import (
	"fmt"
	"sync"

	"github.com/pureverbs/pureverbs/rxe/internal/ring"
	"github.com/pureverbs/pureverbs/uverbs/leakcheck"
	"golang.org/x/sys/unix"
)

// mapping is a queue buffer the kernel shares through the uverbs command fd:
// an mmap of the offset and size from a struct mminfo (PROT_READ|PROT_WRITE,
// MAP_SHARED), as librxe maps it. Close unmaps it.
//
// A mapping dropped without Close is unmapped by a GC cleanup (and the leak
// check reports it), a safety net that matters: a mapped ring holds the
// uverbs file open, so until it is unmapped the kernel never releases the
// context's objects, even after the Context's fds are closed. Only the
// queues use the memory, and they hold the mapping.
type mapping struct {
	mu    sync.Mutex
	mem   []byte // nil once unmapped
	watch leakcheck.Watch
}

// mmapFunc maps length bytes at offset of the file the rings live in:
// (*uverbs.Context).Mmap, which maps the command fd without handing its
// number out.
type mmapFunc func(offset uint64, length int) ([]byte, error)

// mapMem maps the size bytes at offset that a struct mminfo names.
func mapMem(mmap mmapFunc, offset uint64, size uint32) (*mapping, error) {
	if size == 0 {
		return nil, wrapErr("mmap", fmt.Errorf("offset %#x size %d: %w", offset, size, unix.EINVAL))
	}
	mem, err := mmap(offset, int(size))
	if err != nil {
		return nil, wrapErr("mmap", err)
	}
	m := &mapping{mem: mem}
	m.watch = leakcheck.Object(m, fmt.Sprintf("rxe ring mapping of %d bytes at offset %#x", size, offset), func(mem []byte) { unix.Munmap(mem) }, mem)
	return m, nil
}

// Bytes is the mapped memory; nil after Close.
func (m *mapping) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mem
}

// Close unmaps the memory. It is idempotent. Nothing may touch the memory
// afterwards: the queues detach their rings before closing their mappings.
func (m *mapping) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mem == nil {
		return nil
	}
	m.watch.Closed()
	if err := unix.Munmap(m.mem); err != nil {
		return wrapErr("munmap", err)
	}
	m.mem = nil
	return nil
}

// mapRing maps the queue mi describes and attaches a Ring to it.
func mapRing(mmap mmapFunc, mi mmInfo) (*mapping, *ring.Ring, error) {
	m, err := mapMem(mmap, mi.offset, mi.size)
	if err != nil {
		return nil, nil, err
	}
	r, err := ring.New(m.mem)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, r, nil
}
