package uverbs

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// LoadByte reads the byte at off with an atomic load of the aligned
// 32-bit word holding it, so that a loop waiting for the device (or a
// peer's RDMA WRITE) to change that byte sees each change: a plain slice
// read may be kept in a register across iterations. It allocates nothing
// and panics, like a slice index, when off is outside the buffer. After
// Close it returns 0 (as Bytes returns nil).
//
// It takes no lock: a load that races with Close reads either the old
// byte or 0, never an unmapped page, because Close replaces the memory
// with zero pages and returns the address range only once the Buffer is
// unreachable (see Close) — and a LoadByte in flight keeps it reachable.
func (b *Buffer) LoadByte(off int) byte {
	if off < 0 || off >= b.size {
		panic(fmt.Sprintf("uverbs: Buffer.LoadByte offset %d outside [0, %d)", off, b.size))
	}
	if b.closed.Load() {
		return 0
	}
	word := off &^ 3
	v := atomic.LoadUint32((*uint32)(unsafe.Pointer(&b.mem[word])))
	runtime.KeepAlive(b) // its cleanup returns the range (see Close)
	var w [4]byte
	*(*uint32)(unsafe.Pointer(&w[0])) = v // the word's bytes in memory order
	return w[off-word]
}
