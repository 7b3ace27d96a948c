package server

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
)

// kernelQueue is a receive queue as the kernel keeps it: the receives
// posted and not completed yet, each into the buffer of one slot. Posting
// into a buffer that already has a receive in the queue is the double post
// the loop must never make.
type kernelQueue struct {
	base, size  uint64
	outstanding []recv // in posting order
	slotOf      map[uint64]int
	completed   []uint64 // wr_ids completed so far, to repeat stale ones
	wcs         []cq.WC  // what the next Poll returns
	good        []bool   // which of wcs are good receives the loop must deliver
	polledGood  []cq.WC  // the good completions polled so far, in order
	doublePost  error
	failNext    bool // the next PostRecv fails, posting nothing (as rxe's: all or nothing)
}

var errPostFailed = errors.New("post failed (injected)")

type recv struct {
	id   uint64
	slot int
}

func (k *kernelQueue) Poll(wc []cq.WC) (int, error) {
	n := copy(wc, k.wcs)
	for i := range n {
		if k.good[i] {
			k.polledGood = append(k.polledGood, k.wcs[i])
		}
	}
	k.wcs, k.good = k.wcs[n:], k.good[n:]
	return n, nil
}

// complete queues a completion; good says the loop must deliver it.
func (k *kernelQueue) complete(wc cq.WC, good bool) {
	k.wcs = append(k.wcs, wc)
	k.good = append(k.good, good)
}

func (k *kernelQueue) PostRecv(wrs []qp.RecvWR) error {
	if k.failNext {
		k.failNext = false
		return errPostFailed
	}
	for _, w := range wrs {
		slot := int((w.SGEs[0].Addr - k.base) / k.size)
		if slices.ContainsFunc(k.outstanding, func(r recv) bool { return r.slot == slot }) && k.doublePost == nil {
			k.doublePost = fmt.Errorf("slot %d posted while it still has a receive in the queue", slot)
		}
		k.outstanding = append(k.outstanding, recv{w.ID, slot})
		k.slotOf[w.ID] = slot
	}
	return nil
}

func (k *kernelQueue) Arm() error         { return nil }
func (k *kernelQueue) EventFD() int       { return -1 }
func (k *kernelQueue) DrainEvents() error { return nil }

// take removes the i-th outstanding receive (modulo their number) and
// returns its wr_id, or false with none outstanding.
func (k *kernelQueue) take(i byte) (uint64, bool) {
	if len(k.outstanding) == 0 {
		return 0, false
	}
	j := int(i) % len(k.outstanding)
	id := k.outstanding[j].id
	k.outstanding = slices.Delete(k.outstanding, j, j+1)
	k.completed = append(k.completed, id)
	return id, true
}

// holds reports whether the kernel has a receive for slot in its queue, or
// a completion for one not polled yet.
func (k *kernelQueue) holds(slot int) bool {
	return slices.ContainsFunc(k.outstanding, func(r recv) bool { return r.slot == slot }) ||
		slices.ContainsFunc(k.wcs, func(wc cq.WC) bool { s, ok := k.slotOf[wc.WRID]; return ok && s == slot })
}

// FuzzLoopCompletions drives the receive loop with completions a peer and
// the kernel could produce, good and bad — any slot, status, opcode, flags,
// length and immediate, wr_ids of no slot or of a slot not in the queue —
// interleaved with releases (twice, and of stale frames) from the consumer
// and posts that fail. After every step: no slot was posted while still in
// the receive queue, the slots in posted state are exactly those the
// kernel holds, posted + held == depth, and no slot is in two held Frames.
// When the connection ends (a flush, a failed post) the next connection
// posts every slot not held downstream. Every good completion polled is
// delivered, in order, with the length and channel it said — the last one
// too.
func FuzzLoopCompletions(f *testing.F) {
	f.Add([]byte{0, 0, 0, 10, 1, 2, 3, 0, 5, 1, 2})
	f.Add([]byte{0, 1, 3, 0, 0, 0, 0, 2, 9, 9, 9, 9, 2, 0, 3, 2})
	f.Add([]byte{1, 4, 0, 0, 0, 0, 0, 1, 2, 0, 2, 1, 0, 3})
	f.Add([]byte{0, 0, 2, 3, 9, 1, 3, 2, 0, 4, 3, 2, 0, 3, 0, 0, 2, 3, 5, 2, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const depth, size = 8, 64
		k := &kernelQueue{base: 0x1000, size: size, slotOf: map[uint64]int{}}
		p, err := newPool(make([]byte, depth*size), 0x1000, 7, size, depth, -1, func() error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		type delivery struct {
			n        int
			channel  uint8
			position uint32
		}
		var got []delivery // what the handler saw, in order
		var frames []Frame // every frame delivered, stale ones too
		var c counters
		cfg := Config{Depth: depth, MaxPayload: size, PollBatch: 4, Handler: func(f Frame) {
			got = append(got, delivery{f.Len(), f.Channel(), f.Position()})
			frames = append(frames, f)
		}}
		var stop, drain = new(atomicBool), new(atomicBool)
		l := newLoop(p, k, &c, &cfg, nil, &stop.b, &drain.b)
		if err := l.postIdle(); err != nil {
			t.Fatal(err)
		}
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		ended := false // the connection is over: its QP is gone
	run:
		for len(ops) > 0 {
			switch next() % 5 {
			case 0: // the kernel completes a slot of its queue
				pick, status, kind, n, imm := next(), next(), next(), next(), next()
				id, ok := k.take(pick)
				if !ok {
					continue
				}
				wc := cq.WC{WRID: id, Opcode: cq.OpRecv, Flags: cq.WithImm, ByteLen: uint32(n), Imm: uint32(imm)<<8 | uint32(imm%5)}
				switch status % 8 {
				case 0:
					wc.Status = cq.WRFlushErr
				case 1:
					wc.Status = cq.LocLenErr
				}
				switch kind % 4 {
				case 0:
					wc.Flags = 0 // a SEND without immediate
				case 1:
					wc.Opcode = cq.OpRecvRDMAWithImm
				}
				k.complete(wc, wc.Status == cq.Success && wc.Opcode == cq.OpRecv && wc.Flags&cq.WithImm != 0 && n > 0 && int(n) <= size)
			case 1: // a completion repeated, or naming no receive ever posted
				id := uint64(next()) | 1<<63
				if b := next(); b%2 == 0 && len(k.completed) > 0 {
					id = k.completed[int(b/2)%len(k.completed)]
				}
				if slices.ContainsFunc(k.outstanding, func(r recv) bool { return r.id == id }) {
					continue // that is no stray: only the kernel's completion of it
				}
				k.complete(cq.WC{WRID: id, Opcode: cq.OpRecv, Flags: cq.WithImm, ByteLen: 1}, false)
			case 2: // the consumer releases a frame, maybe one it released before
				if len(frames) > 0 {
					frames[int(next())%len(frames)].Release()
				}
			case 3:
				_, err := l.step()
				if k.doublePost != nil {
					t.Fatal(k.doublePost)
				}
				checkSlots(t, p, k, frames)
				if errors.Is(err, ErrFlushed) || errors.Is(err, errPostFailed) {
					ended = true
					break run
				}
				if err != nil {
					t.Fatal(err)
				}
			case 4: // the next post fails
				k.failNext = true
			}
		}
		// Drain what the kernel has queued.
		for !ended && len(k.wcs) > 0 {
			_, err := l.step()
			if errors.Is(err, ErrFlushed) || errors.Is(err, errPostFailed) {
				ended = true
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if k.doublePost != nil {
			t.Fatal(k.doublePost)
		}
		checkSlots(t, p, k, frames)
		want := k.polledGood
		if len(got) != len(want) {
			t.Fatalf("%d frames delivered, %d good completions polled", len(got), len(want))
		}
		for i, d := range got {
			if d.n != int(want[i].ByteLen) || d.channel != uint8(want[i].Imm) || d.position != want[i].Imm>>8 {
				t.Fatalf("frame %d: %+v, completion %+v", i, d, want[i])
			}
		}
		// The next connection: a fresh queue gets every slot not held.
		k2 := &kernelQueue{base: 0x1000, size: size, slotOf: map[uint64]int{}}
		l2 := newLoop(p, k2, &c, &cfg, nil, &stop.b, &drain.b)
		p.unpostAll() // the old QP is destroyed with what it held
		if err := l2.postIdle(); err != nil {
			t.Fatal(err)
		}
		checkSlots(t, p, k2, frames)
		held := 0
		for _, f := range frames {
			if f.Held() {
				held++
			}
		}
		if len(k2.outstanding)+held != depth {
			t.Fatalf("next connection: %d slots posted + %d frames held != depth %d: a slot was lost", len(k2.outstanding), held, depth)
		}
	})
}

// checkSlots compares the pool's slot states and counts with the kernel's
// receive queue and the frames held downstream.
func checkSlots(t *testing.T, p *pool, k *kernelQueue, frames []Frame) {
	t.Helper()
	posted, held := p.postedHeld()
	if posted+held != p.depth {
		t.Fatalf("posted %d + held %d != depth %d", posted, held, p.depth)
	}
	inQueue, downstream := 0, 0
	for i := range p.slots {
		switch p.slots[i].state() {
		case slotPosted:
			inQueue++
			if !k.holds(i) {
				t.Fatalf("slot %d is posted for the loop but not in the kernel's queue", i)
			}
		case slotDownstream:
			downstream++
		}
	}
	if inQueue != posted {
		t.Fatalf("%d slots in posted state, counted %d", inQueue, posted)
	}
	owner := map[uint32]int{}
	live := 0
	for i, f := range frames {
		if !f.Held() {
			continue
		}
		live++
		if j, ok := owner[f.slot]; ok {
			t.Fatalf("slot %d is held by frames %d and %d", f.slot, j, i)
		}
		owner[f.slot] = i
	}
	if live != downstream {
		t.Fatalf("%d frames held, %d slots downstream", live, downstream)
	}
}
