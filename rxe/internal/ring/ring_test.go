package ring

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs/abicheck"
)

func mustRing(t testing.TB, elemSize, elems int) *Ring {
	t.Helper()
	r, err := Alloc(elemSize, elems)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAllocGeometry(t *testing.T) {
	for _, c := range []struct {
		elemSize, elems     int
		wantElem, wantSlots int
	}{
		{8, 1, 8, 2},
		{48, 3, 64, 4},   // 3+1 slots is already a power of two
		{208, 4, 256, 8}, // 4+1 rounds up to 8
		{224, 255, 256, 256},
		{1024, 256, 1024, 512},
	} {
		r := mustRing(t, c.elemSize, c.elems)
		if r.ElemSize() != c.wantElem || r.Slots() != c.wantSlots || r.Capacity() != c.wantSlots-1 {
			t.Errorf("Alloc(%d, %d): elem %d slots %d capacity %d, want %d %d %d",
				c.elemSize, c.elems, r.ElemSize(), r.Slots(), r.Capacity(), c.wantElem, c.wantSlots, c.wantSlots-1)
		}
		if r.Capacity() < c.elems {
			t.Errorf("Alloc(%d, %d) holds only %d", c.elemSize, c.elems, r.Capacity())
		}
		if got := len(r.mem); got != HeaderSize+c.wantSlots*c.wantElem {
			t.Errorf("Alloc(%d, %d) buffer %d bytes", c.elemSize, c.elems, got)
		}
		if !r.Empty() || r.Full() || r.Len() != 0 {
			t.Errorf("new ring not empty")
		}
	}
}

// rawQueue builds a raw queue buffer of size bytes with the given header.
func rawQueue(size int, log2, mask uint32) []byte {
	words := make([]uint64, (size+7)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
	binary.NativeEndian.PutUint32(b[0:], log2)
	binary.NativeEndian.PutUint32(b[4:], mask)
	return b
}

func TestNewRingRejectsBadHeaders(t *testing.T) {
	good := rawQueue(384+4*64, 6, 3)
	if _, err := New(good); err != nil {
		t.Fatalf("good header: %v", err)
	}
	for name, b := range map[string][]byte{
		"short":              good[:100],
		"slots past the end": good[:384+3*64],
		"mask not 2^n-1":     rawQueue(384+4*64, 6, 2),
		"elem too small":     rawQueue(384+4*64, 2, 3),
		"elem too large":     rawQueue(384+4*64, 17, 3),
		"misaligned":         rawQueue(384+4*64+8, 6, 3)[1:],
	} {
		if _, err := New(b); !errors.Is(err, ErrBad) {
			t.Errorf("%s: err = %v, want ErrBad", name, err)
		}
	}
}

func TestRingFullEmptyWrap(t *testing.T) {
	r := mustRing(t, 16, 3) // 4 slots, capacity 3
	var prod, cons uint32
	for round := 0; round < 10; round++ { // wraps the 4 slots many times
		for i := 0; i < 3; i++ {
			if r.Full() {
				t.Fatalf("round %d: full after %d", round, i)
			}
			binary.NativeEndian.PutUint64(r.Slot(prod), uint64(round*3+i))
			prod = r.Next(prod)
			r.SetProducer(prod)
		}
		if !r.Full() || r.Len() != 3 || r.Room(r.Producer(), r.Consumer()) != 0 {
			t.Fatalf("round %d: full=%v len=%d", round, r.Full(), r.Len())
		}
		for i := 0; i < 3; i++ {
			if got := binary.NativeEndian.Uint64(r.Slot(cons)); got != uint64(round*3+i) {
				t.Fatalf("round %d: slot %d holds %d", round, cons, got)
			}
			cons = r.Next(cons)
			r.SetConsumer(cons)
		}
		if !r.Empty() || r.Len() != 0 || r.Room(prod, cons) != 3 {
			t.Fatalf("round %d: not empty", round)
		}
	}
}

func TestRingIndicesStayMasked(t *testing.T) {
	r := mustRing(t, 16, 3)
	// A corrupt index from the other side must not address memory outside
	// the slots.
	r.hdr.producerIndex = 0xffff_fff7
	if p := r.Producer(); p > 3 {
		t.Fatalf("Producer() = %#x, not masked", p)
	}
	if off := uintptr(r.At(0xffff_fff7)) - uintptr(r.data); off != 3*16 {
		t.Fatalf("slot offset %d, want 48", off)
	}
}

// The ring header is struct rxe_queue_buf: sizes and offsets from gcc over
// the header (package abicheck), and the slots start at its data[].
func TestLayoutQueueBuf(t *testing.T) {
	abicheck.Check(t, []string{"rdma/rdma_user_rxe.h"}, []abicheck.Pin{{
		C: "struct rxe_queue_buf", Go: reflect.TypeFor[header](),
		Exprs: map[string]uintptr{"offsetof(struct rxe_queue_buf, data)": uintptr(HeaderSize)},
	}})
}
