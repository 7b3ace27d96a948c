// Package ring is the user side's view of an rdma_rxe queue buffer (struct
// rxe_queue_buf): geometry, indices and slots, shared by package rxe, which
// maps the kernel's buffers, and its simulator rxesim, which plays the
// kernel's side in ordinary memory.
package ring

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// ErrBad reports a ring header that does not describe the memory it sits
// in (a slot size or slot count that is not a power of two, or slots that run
// past the end of the mapping).
var ErrBad = errors.New("rxe: bad ring header")

// Ring is a view of one struct rxe_queue_buf: a header holding the slot size
// and index mask, a producer index, a consumer index, and a power-of-two
// number of slots. One slot is always kept empty, so a ring of n slots holds
// at most n-1 elements. Indices stored in the ring are already masked.
//
// Each side of a ring owns one index: it publishes it with an atomic store
// (release) after writing (producer) or reading (consumer) the slots it
// covers, and reads the other side's index with an atomic load (acquire)
// before touching the slots that index gives it. Go's sync/atomic is
// sequentially consistent, which is at least that strong, and it pairs with
// smp_load_acquire/smp_store_release in the kernel's rxe_queue.h.
//
// A Ring does no locking: callers serialise the producer side and the
// consumer side themselves (the queues in package rxe do).
type Ring struct {
	mem   []byte  // the whole queue buffer; keeps it reachable
	hdr   *header // == &mem[0]
	data  unsafe.Pointer
	mask  uint32
	shift uint32
}

// New attaches to the queue buffer in mem (usually a mapping of the uverbs fd),
// reading the geometry from its header as librxe does; the kernel has
// already initialised it. mem must stay valid for the life of the Ring.
func New(mem []byte) (*Ring, error) {
	if len(mem) < HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrBad, len(mem), HeaderSize)
	}
	base := unsafe.Pointer(&mem[0])
	if uintptr(base)%8 != 0 {
		return nil, fmt.Errorf("%w: buffer not 8-byte aligned", ErrBad)
	}
	hdr := (*header)(base)
	shift := atomic.LoadUint32(&hdr.log2ElemSize)
	mask := atomic.LoadUint32(&hdr.indexMask)
	slots := uint64(mask) + 1
	if shift < 3 || shift > 16 || slots&(slots-1) != 0 || slots > 1<<24 {
		return nil, fmt.Errorf("%w: log2_elem_size %d, index_mask %#x", ErrBad, shift, mask)
	}
	if need := uint64(HeaderSize) + slots<<shift; need > uint64(len(mem)) {
		return nil, fmt.Errorf("%w: %d slots of %d bytes need %d bytes, have %d",
			ErrBad, slots, 1<<shift, need, len(mem))
	}
	return &Ring{
		mem:   mem,
		hdr:   hdr,
		data:  unsafe.Add(base, HeaderSize),
		mask:  mask,
		shift: shift,
	}, nil
}

// Alloc makes a ring in ordinary memory and initialises its header the
// way the kernel's rxe_queue_init does: elemSize is rounded up to a power of
// two and the slot count to a power of two holding at least elems+1 slots.
// It plays the kernel's part for simulations and tests.
func Alloc(elemSize, elems int) (*Ring, error) {
	if elemSize < 8 || elemSize > 1<<16 || elems < 1 || elems >= 1<<23 {
		return nil, fmt.Errorf("%w: %d elements of %d bytes", ErrBad, elems, elemSize)
	}
	shift := uint32(bits.Len(uint(elemSize - 1)))
	slots := 1 << bits.Len(uint(elems)) // smallest power of two > elems
	size := HeaderSize + slots<<shift
	words := make([]uint64, (size+7)/8) // 8-byte aligned backing store
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
	hdr := (*header)(unsafe.Pointer(&mem[0]))
	hdr.log2ElemSize = shift
	hdr.indexMask = uint32(slots - 1)
	return New(mem)
}

// ElemSize is the size of one slot in bytes (1 << log2_elem_size).
func (r *Ring) ElemSize() int { return 1 << r.shift }

// Slots is the number of slots, a power of two.
func (r *Ring) Slots() int { return int(r.mask) + 1 }

// Capacity is the number of elements the ring holds when full: Slots()-1.
func (r *Ring) Capacity() int { return int(r.mask) }

// Producer loads the producer index (acquire), masked.
func (r *Ring) Producer() uint32 { return atomic.LoadUint32(&r.hdr.producerIndex) & r.mask }

// Consumer loads the consumer index (acquire), masked.
func (r *Ring) Consumer() uint32 { return atomic.LoadUint32(&r.hdr.consumerIndex) & r.mask }

// SetProducer publishes the producer index (release): every slot before
// index must be fully written before the call.
func (r *Ring) SetProducer(index uint32) { atomic.StoreUint32(&r.hdr.producerIndex, index&r.mask) }

// SetConsumer publishes the consumer index (release): every slot before
// index must be fully read before the call.
func (r *Ring) SetConsumer(index uint32) { atomic.StoreUint32(&r.hdr.consumerIndex, index&r.mask) }

// Next is the index after index.
func (r *Ring) Next(index uint32) uint32 { return (index + 1) & r.mask }

// Count is the number of elements between consumer index cons and producer
// index prod.
func (r *Ring) Count(prod, cons uint32) int { return int((prod - cons) & r.mask) }

// Room is the number of elements a producer at index prod may still write
// before reaching consumer index cons (one slot stays empty).
func (r *Ring) Room(prod, cons uint32) int { return int((cons - prod - 1) & r.mask) }

// Len is the number of elements in the ring now.
func (r *Ring) Len() int { return r.Count(r.Producer(), r.Consumer()) }

// Empty reports whether the ring holds no element.
func (r *Ring) Empty() bool { return r.Producer() == r.Consumer() }

// Full reports whether the ring holds Capacity() elements.
func (r *Ring) Full() bool { return r.Next(r.Producer()) == r.Consumer() }

// Slot returns the bytes of the slot at index (masked). The slice aliases the
// ring; it is valid as long as the ring's memory is.
func (r *Ring) Slot(index uint32) []byte {
	return unsafe.Slice((*byte)(r.At(index)), 1<<r.shift)
}

// At is the address of the slot at index: data + ((index & mask) << shift).
// The encoders in package rxe write WQEs and read completions through it.
func (r *Ring) At(index uint32) unsafe.Pointer {
	return unsafe.Add(r.data, uintptr(index&r.mask)<<r.shift)
}

// header is struct rxe_queue_buf without its flexible data[]. The producer
// and consumer indices sit in separate cache lines; the slots start right
// after the header.
type header struct {
	log2ElemSize  uint32
	indexMask     uint32
	_             [30]uint32
	producerIndex uint32
	_             [31]uint32
	consumerIndex uint32
	_             [31]uint32
}

// HeaderSize is sizeof(struct rxe_queue_buf), the offset of data[].
const HeaderSize = int(unsafe.Sizeof(header{}))
