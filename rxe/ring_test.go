package rxe

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/pureverbs/pureverbs/rxe/internal/ring"
)

func mustRing(t testing.TB, elemSize, elems int) *ring.Ring {
	t.Helper()
	r, err := ring.Alloc(elemSize, elems)
	if err != nil {
		t.Fatal(err)
	}
	return r
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
			encodeWC(r.Slot(prod), &WC{WRID: seq, ByteLen: uint32(seq), Imm: uint32(^seq), Flags: WCWithImm, Opcode: WCRecv})
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
