package uverbs

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// LoadByte reads the byte at off with an atomic load of the aligned
// 32-bit word holding it, so that a loop waiting for the device (or a
// peer's RDMA WRITE) to change that byte sees each change: a plain slice
// read may be kept in a register across iterations. It allocates nothing
// and panics, like a slice index, when off is outside the buffer. After
// Close it returns 0 (as Bytes returns nil); a Close from another
// goroutine waits for the load in flight.
func (b *Buffer) LoadByte(off int) byte {
	if off < 0 || off >= b.size {
		panic(fmt.Sprintf("uverbs: Buffer.LoadByte offset %d outside [0, %d)", off, b.size))
	}
	b.mapped.RLock()
	if b.closed.Load() {
		b.mapped.RUnlock()
		return 0
	}
	word := off &^ 3
	v := atomic.LoadUint32((*uint32)(unsafe.Pointer(&b.mem[word])))
	b.mapped.RUnlock()
	var w [4]byte
	*(*uint32)(unsafe.Pointer(&w[0])) = v // the word's bytes in memory order
	return w[off-word]
}
