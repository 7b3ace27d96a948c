package rxe

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// An SRQ's ring holds struct rxe_recv_wqe like a QP's receive ring: PostRecv
// writes them past the producer index and publishes all or none, without
// allocating.
func TestSRQPostRecv(t *testing.T) {
	r := mustRing(t, 128, 15) // 15 usable slots of 128 bytes
	s := &SRQ{rq: &recvQueue{producer: producer{ring: r, prod: r.Producer(), maxWR: depth(10, r)}, maxSGE: 2}}
	if mw, ms := s.Limits(); mw != 10 || ms != 2 {
		t.Fatalf("Limits = %d, %d", mw, ms)
	}
	sges := []SGE{{Addr: 0x1000, Length: 100, LKey: 7}, {Addr: 0x2000, Length: 28, LKey: 7}}
	if err := s.PostRecv([]RecvWR{{ID: 1, SGEs: sges}, {ID: 2, SGEs: sges[:1]}}); err != nil {
		t.Fatal(err)
	}
	if got := r.Producer(); got != 2 {
		t.Fatalf("producer %d after two requests", got)
	}
	w := (*recvWQE)(r.At(0))
	if w.wrID != 1 || w.dma.length != 128 || w.dma.resid != 128 || w.dma.numSGE != 2 {
		t.Errorf("slot 0: %+v", *w)
	}
	if got := unsafe.Slice((*SGE)(unsafe.Add(r.At(0), recvWQESize)), 2); got[1] != sges[1] {
		t.Errorf("slot 0 SGE 1 = %+v", got[1])
	}
	if w := (*recvWQE)(r.At(1)); w.wrID != 2 || w.dma.numSGE != 1 || w.dma.length != 100 {
		t.Errorf("slot 1: %+v", *w)
	}
	// All or nothing: a bad request anywhere posts none.
	if err := s.PostRecv([]RecvWR{{ID: 3}, {ID: 4, SGEs: []SGE{{}, {}, {}}}}); !errors.Is(err, ErrTooManySGEs) {
		t.Fatalf("three SGEs: %v", err)
	}
	if err := s.PostRecv(make([]RecvWR, 9)); !errors.Is(err, ErrQueueFull) || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("past the depth: %v", err)
	}
	if got := r.Producer(); got != 2 {
		t.Fatalf("producer %d after refused posts", got)
	}
	one := []RecvWR{{ID: 5, SGEs: sges[:1]}}
	if n := testing.AllocsPerRun(100, func() {
		if err := s.PostRecv(one); err != nil {
			t.Fatal(err)
		}
		r.SetConsumer(r.Producer()) // the kernel took it
	}); n != 0 {
		t.Errorf("PostRecv allocates %v times", n)
	}
	if err := s.release(); err != nil {
		t.Fatal(err)
	}
	if err := s.PostRecv(one); !errors.Is(err, ErrClosed) {
		t.Fatalf("PostRecv after release: %v", err)
	}
}

// A QP on an SRQ has no receive ring; posting to it says so.
func TestQPOnSRQPostRecv(t *testing.T) {
	q := &QP{}
	err := q.PostRecv([]RecvWR{{}})
	// A caller's mistake, not a missing feature.
	if !errors.Is(err, ErrSRQAttached) || errors.Is(err, ErrNotSupported) || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("PostRecv = %v", err)
	}
}
