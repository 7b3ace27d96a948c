package rxe

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

func mustRing(t testing.TB, elemSize, elems int) *Ring {
	t.Helper()
	r, err := AllocRing(elemSize, elems)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAllocRingGeometry(t *testing.T) {
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
			t.Errorf("AllocRing(%d, %d): elem %d slots %d capacity %d, want %d %d %d",
				c.elemSize, c.elems, r.ElemSize(), r.Slots(), r.Capacity(), c.wantElem, c.wantSlots, c.wantSlots-1)
		}
		if r.Capacity() < c.elems {
			t.Errorf("AllocRing(%d, %d) holds only %d", c.elemSize, c.elems, r.Capacity())
		}
		if got := len(r.mem); got != ringHeaderSize+c.wantSlots*c.wantElem {
			t.Errorf("AllocRing(%d, %d) buffer %d bytes", c.elemSize, c.elems, got)
		}
		if !r.Empty() || r.Full() || r.Len() != 0 {
			t.Errorf("new ring not empty")
		}
	}
}

// header builds a raw queue buffer of size bytes with the given header.
func header(size int, log2, mask uint32) []byte {
	words := make([]uint64, (size+7)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
	binary.NativeEndian.PutUint32(b[0:], log2)
	binary.NativeEndian.PutUint32(b[4:], mask)
	return b
}

func TestNewRingRejectsBadHeaders(t *testing.T) {
	good := header(384+4*64, 6, 3)
	if _, err := NewRing(good); err != nil {
		t.Fatalf("good header: %v", err)
	}
	for name, b := range map[string][]byte{
		"short":              good[:100],
		"slots past the end": good[:384+3*64],
		"mask not 2^n-1":     header(384+4*64, 6, 2),
		"elem too small":     header(384+4*64, 2, 3),
		"elem too large":     header(384+4*64, 17, 3),
		"misaligned":         header(384+4*64+8, 6, 3)[1:],
	} {
		if _, err := NewRing(b); !errors.Is(err, ErrBadRing) {
			t.Errorf("%s: err = %v, want ErrBadRing", name, err)
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
	if off := uintptr(r.slot(0xffff_fff7)) - uintptr(r.data); off != 3*16 {
		t.Fatalf("slot offset %d, want 48", off)
	}
}

// TestRingSimulatedKernelConsumer streams far more entries than the ring has
// slots through a send-style ring whose consumer is a goroutine playing the
// kernel: it reads only slots the acquire load of the producer index
// covers, and hands them back with a release store of the consumer index.
// Under -race this also proves the ordering: a slot written after its
// producer store would be reported.
func TestRingSimulatedKernelConsumer(t *testing.T) {
	const total = 20000
	r := mustRing(t, 64, 7)
	done := make(chan error, 1)
	go func() {
		var cons uint32
		for want := uint64(0); want < total; {
			prod := r.Producer()
			if prod == cons {
				runtime.Gosched()
				continue
			}
			for ; cons != prod; cons = r.Next(cons) {
				s := r.Slot(cons)
				if got := binary.NativeEndian.Uint64(s); got != want {
					done <- errors.New("kernel read a wrong or torn entry")
					return
				}
				if binary.NativeEndian.Uint64(s[56:]) != ^want {
					done <- errors.New("kernel read a half-written slot")
					return
				}
				want++
			}
			r.SetConsumer(cons)
		}
		done <- nil
	}()
	var prod uint32
	full := 0
	for seq := uint64(0); seq < total; {
		if r.Room(prod, r.Consumer()) == 0 {
			full++
			runtime.Gosched()
			continue
		}
		s := r.Slot(prod)
		binary.NativeEndian.PutUint64(s, seq)
		binary.NativeEndian.PutUint64(s[56:], ^seq)
		prod = r.Next(prod)
		r.SetProducer(prod)
		seq++
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !r.Empty() {
		t.Fatal("ring not drained")
	}
	t.Logf("producer found the ring full %d times", full)
}

// TestCQSimulatedKernelProducer is the mirror image: a goroutine plays the
// kernel's completer, producing completions, and poll consumes them in
// batches across many wraps; none may be lost, duplicated or torn.
func TestCQSimulatedKernelProducer(t *testing.T) {
	const total = 20000
	r := mustRing(t, 64, 15)
	c, err := newCQRing(r)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var prod uint32
		for seq := uint64(0); seq < total; {
			if r.Room(prod, r.Consumer()) == 0 {
				runtime.Gosched()
				continue
			}
			EncodeWC(r.Slot(prod), &WC{WRID: seq, ByteLen: uint32(seq), Imm: uint32(^seq), Flags: WCWithImm, Opcode: WCRecv})
			prod = r.Next(prod)
			r.SetProducer(prod)
			seq++
		}
	}()
	wc := make([]WC, 5)
	for next := uint64(0); next < total; {
		n, err := c.poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			runtime.Gosched()
		}
		for _, w := range wc[:n] {
			if w.WRID != next || w.ByteLen != uint32(next) || w.Imm != uint32(^next) || w.Opcode != WCRecv {
				t.Fatalf("completion %d: %+v", next, w)
			}
			next++
		}
	}
	wg.Wait()
	if n, _ := c.poll(wc); n != 0 {
		t.Fatalf("%d completions beyond the end", n)
	}
}

func TestCQRejectsSmallSlots(t *testing.T) {
	if _, err := newCQRing(mustRing(t, 32, 3)); !errors.Is(err, ErrBadRing) {
		t.Fatalf("err = %v, want ErrBadRing", err)
	}
}

func TestCQPollAfterDetach(t *testing.T) {
	c, err := newCQRing(mustRing(t, 64, 3))
	if err != nil {
		t.Fatal(err)
	}
	c.detach()
	if _, err := c.poll(make([]WC, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}
