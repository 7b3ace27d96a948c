package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
)

// fill writes a pattern for message seq into b.
func fill(b []byte, seq int) {
	for i := range b {
		b[i] = byte(seq*31 + i*7)
	}
}

// TestLoopStream streams messages of many sizes on several channels
// through the loop on a goroutine, with some frames released at once and
// some later from another goroutine, and checks every payload, the
// per-channel counts, no gaps, and posted + held == depth throughout.
func TestLoopStream(t *testing.T) {
	const depth, size, total = 16, 512, 3000
	var mu sync.Mutex
	var got []string
	late := make(chan Frame, depth)
	var r *simRig
	r = newSimRig(t, depth, size, func(f Frame) {
		r.checkInvariant()
		mu.Lock()
		got = append(got, string(f.Data()))
		mu.Unlock()
		if f.Position()%3 == 0 {
			late <- f
			return
		}
		f.Release()
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for f := range late {
			time.Sleep(10 * time.Microsecond)
			f.Release()
		}
	}()
	errc := make(chan error, 1)
	go func() { errc <- r.l.run() }()
	var want []string
	pos := [4]uint32{}
	for i := range total {
		n := 1 + (i*37)%size
		ch := uint8(i % 4)
		off := (i % srcSlots) * size
		fill(r.src[off:off+n], i)
		want = append(want, string(r.src[off:off+n]))
		for !r.send(qp.SendWithImm, off, n, pos[ch]<<8|uint32(ch)) {
			time.Sleep(time.Microsecond) // sender queue full: RNR back-pressure
		}
		pos[ch]++
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.c.frames.Load() < total && time.Now().Before(deadline) {
		r.q.dev.Process()
		r.q.notify()
		time.Sleep(100 * time.Microsecond)
	}
	r.stop.Store(true)
	r.p.wake()
	if err := <-errc; !errors.Is(err, errStopped) {
		t.Fatalf("loop ended with %v", err)
	}
	close(late)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != total {
		t.Fatalf("got %d frames, want %d", len(got), total)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("frame %d differs (len %d, want %d)", i, len(got[i]), len(want[i]))
		}
	}
	s := r.c.snapshot(r.p)
	for ch := range 4 {
		if s.ChannelFrames[ch] != total/4 || s.ChannelRing[ch].Gaps != 0 {
			t.Errorf("channel %d: %d frames, %d gaps; want %d, 0", ch, s.ChannelFrames[ch], s.ChannelRing[ch].Gaps, total/4)
		}
	}
	if s.Posted+s.Held != depth || s.TotalErrors() != 0 || s.BadLength+s.BadOpcode+s.BadWRID != 0 {
		t.Errorf("stats %+v", s)
	}
}

// scripted is a queue whose completions the test writes.
type scripted struct {
	wcs    []cq.WC
	posted [][]uint64
	err    error
}

func (s *scripted) Poll(wc []cq.WC) (int, error) {
	n := copy(wc, s.wcs)
	s.wcs = s.wcs[n:]
	return n, s.err
}

func (s *scripted) PostRecv(wrs []qp.RecvWR) error {
	var ids []uint64
	for _, w := range wrs {
		ids = append(ids, w.ID)
	}
	s.posted = append(s.posted, ids)
	return nil
}
func (s *scripted) Arm() error         { return nil }
func (s *scripted) EventFD() int       { return -1 }
func (s *scripted) DrainEvents() error { return nil }

func recvWC(id uint64, n uint32, imm uint32) cq.WC {
	return cq.WC{WRID: id, Opcode: cq.OpRecv, Flags: cq.WithImm, ByteLen: n, Imm: imm}
}

// TestLoopBadCompletions feeds every kind of bad completion through one
// step: each is counted where it belongs, its slot re-posted in one batch
// (except the foreign wr_id, which is dropped), and a flush ends the loop
// leaving its slot idle.
func TestLoopBadCompletions(t *testing.T) {
	const depth, size = 8, 100
	var delivered []Frame
	q := &scripted{}
	p, err := newPool(make([]byte, depth*size), 0x1000, 7, size, depth, -1, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var c counters
	cfg := Config{Depth: depth, MaxPayload: size, PollBatch: 16, Handler: func(f Frame) { delivered = append(delivered, f) }}
	var stop, drain = new(atomicBool), new(atomicBool)
	l := newLoop(p, q, &c, &cfg, nil, &stop.b, &drain.b)
	if err := l.postIdle(); err != nil {
		t.Fatal(err)
	}
	id := q.posted[0] // the wr_id of each slot's receive
	q.posted = nil
	q.wcs = []cq.WC{
		recvWC(id[0], 10, 5<<8|3),                     // good: channel 3, position 5
		recvWC(99, 10, 0),                             // wr_id of no slot
		recvWC(id[0], 10, 0),                          // slot 0 again: not posted any more
		recvWC(id[1]+1<<32, 10, 0),                    // slot 1, but not its current receive
		{WRID: id[1], Status: cq.LocLenErr},           // error status
		{WRID: id[2], Opcode: cq.OpRecv, ByteLen: 10}, // plain SEND: no immediate
		recvWC(id[3], 0, 0),                           // zero length
		recvWC(id[4], size+1, 0),                      // longer than a slot
		{WRID: id[5], Opcode: cq.OpRecvRDMAWithImm, Flags: cq.WithImm, ByteLen: 4}, // WRITE_WITH_IMM
	}
	if _, err := l.step(); err != nil {
		t.Fatal(err)
	}
	if len(delivered) != 1 || delivered[0].Channel() != 3 || delivered[0].Position() != 5 || delivered[0].Len() != 10 || delivered[0].FirstUser() != SOF {
		t.Fatalf("delivered %+v", delivered)
	}
	if len(q.posted) != 1 || len(q.posted[0]) != 5 || uint32(q.posted[0][0]) != 1 || q.posted[0][0] == id[1] {
		t.Fatalf("re-posts %v, want one batch of slots 1..5 (with new wr_ids) but not 0", q.posted)
	}
	s := c.snapshot(p)
	if s.BadWRID != 3 || s.ErrorCount(cq.LocLenErr) != 1 || s.BadOpcode != 2 || s.BadLength != 2 {
		t.Errorf("counters: wrid %d loclen %d opcode %d length %d", s.BadWRID, s.ErrorCount(cq.LocLenErr), s.BadOpcode, s.BadLength)
	}
	if s.Posted != depth-1 || s.Held != 1 {
		t.Errorf("posted %d held %d, want %d and 1", s.Posted, s.Held, depth-1)
	}
	delivered[0].Release()
	q.posted = nil
	q.wcs = []cq.WC{{WRID: id[6], Status: cq.WRFlushErr}, {WRID: id[7], Status: cq.WRFlushErr}}
	if _, err := l.step(); !errors.Is(err, ErrFlushed) {
		t.Fatalf("step after flush: %v", err)
	}
	if len(q.posted) != 1 || len(q.posted[0]) != 1 || uint32(q.posted[0][0]) != 0 {
		t.Errorf("re-posts after flush %v: want only the released slot 0", q.posted)
	}
	if p.slots[6].state() != slotIdle || p.slots[7].state() != slotIdle || c.errors[cq.WRFlushErr].Load() != 2 {
		t.Errorf("flushed slots: states %d %d, count %d", p.slots[6].state(), p.slots[7].state(), c.errors[cq.WRFlushErr].Load())
	}
}

// TestLoopHoldAll holds every slot: nothing is posted, the sender stalls;
// releasing one lets exactly one more message in; releasing all resumes
// the stream with nothing lost.
func TestLoopHoldAll(t *testing.T) {
	const depth, size = 8, 64
	var held []Frame
	r := newSimRig(t, depth, size, func(f Frame) { held = append(held, f) })
	step := func() {
		t.Helper()
		if _, err := r.l.step(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range depth + 5 {
		binary.LittleEndian.PutUint32(r.src[i*size:], uint32(i))
		if !r.send(qp.SendWithImm, i*size, 4, uint32(i)<<8) {
			t.Fatal("sender queue full")
		}
		step()
	}
	step()
	if len(held) != depth {
		t.Fatalf("%d frames delivered while every slot was held, want %d", len(held), depth)
	}
	if s := r.c.snapshot(r.p); s.Posted != 0 || s.Held != depth || s.PostedLowMark != 0 {
		t.Fatalf("posted %d held %d low %d", s.Posted, s.Held, s.PostedLowMark)
	}
	held[0].Release()
	held = held[1:]
	step() // re-posts the slot; the simulated kernel retries the stalled send into it
	step()
	if len(held) != depth {
		t.Fatalf("after one release %d frames held, want %d (exactly one more)", len(held), depth)
	}
	for _, f := range held {
		f.Release()
	}
	held = nil
	for range 4 {
		step()
	}
	seen := map[uint32]bool{}
	for _, f := range held {
		seen[binary.LittleEndian.Uint32(f.Data())] = true
	}
	if len(held) != 4 || !seen[depth+1] || !seen[depth+4] {
		t.Fatalf("after releasing all: %d frames (%v), want the last 4 messages", len(held), seen)
	}
	if g := r.c.snapshot(r.p).Ring.Gaps; g != 0 {
		t.Errorf("%d gaps", g)
	}
	r.checkInvariant()
}

// TestLoopParkAndWake lets the loop park (spin budget negative), then a
// message wakes it through the armed CQ's event, and a stop wakes it too.
func TestLoopParkAndWake(t *testing.T) {
	got := make(chan []byte, 1)
	r := newSimRig(t, 4, 64, func(f Frame) { got <- bytes.Clone(f.Data()); f.Release() })
	r.l.spin = -1
	errc := make(chan error, 1)
	go func() { errc <- r.l.run() }()
	waitFor(t, func() bool { return r.parked() })
	copy(r.src, "hello")
	r.send(qp.SendWithImm, 0, 5, 1)
	if b := <-got; string(b) != "hello" {
		t.Fatalf("got %q", b)
	}
	if r.q.drained.Load() == 0 {
		t.Error("the loop did not drain the channel event")
	}
	waitFor(t, func() bool { return r.parked() })
	r.stop.Store(true)
	r.p.wake()
	if err := <-errc; !errors.Is(err, errStopped) {
		t.Fatal(err)
	}
}

// TestLoopReleaseWakesParked: with every slot held the loop parks; a
// Release from another goroutine wakes it to re-post.
func TestLoopReleaseWakesParked(t *testing.T) {
	held := make(chan Frame, 4)
	r := newSimRig(t, 2, 64, func(f Frame) { held <- f })
	r.l.spin = -1
	go r.l.run()
	t.Cleanup(func() { r.stop.Store(true); r.p.wake() })
	r.send(qp.SendWithImm, 0, 1, 0)
	r.send(qp.SendWithImm, 0, 1, 1<<8)
	f1, f2 := <-held, <-held
	waitFor(t, func() bool { return r.parked() })
	f1.Release()
	waitFor(t, func() bool { p, _ := r.p.postedHeld(); return p == 1 })
	f2.Release()
	waitFor(t, func() bool { p, _ := r.p.postedHeld(); return p == 2 })
}

// TestLoopDrain: in drain mode the loop ends once nothing is posted.
func TestLoopDrain(t *testing.T) {
	held := make(chan Frame, 4)
	r := newSimRig(t, 2, 64, func(f Frame) { held <- f })
	r.l.spin = -1
	errc := make(chan error, 1)
	go func() { errc <- r.l.run() }()
	r.send(qp.SendWithImm, 0, 1, 0)
	r.send(qp.SendWithImm, 0, 1, 1<<8)
	within(t, "the first frame", held)
	within(t, "the second frame", held)
	r.drain.Store(true)
	r.p.wake()
	if err := within(t, "the drained loop's return", errc); !errors.Is(err, errStopped) {
		t.Fatal(err)
	}
}

// TestLoopDrainGivesUp: a draining loop whose posted receives never
// complete (rxe flushes only what was queued when the QP went to ERROR)
// stops after drainLimit instead of waiting for ever, and posts nothing on
// the dying QP meanwhile: a slot released during the drain waits for the
// next connection.
func TestLoopDrainGivesUp(t *testing.T) {
	held := make(chan Frame, 4)
	r := newSimRig(t, 4, 64, func(f Frame) { held <- f })
	r.l.spin = -1
	errc := make(chan error, 1)
	go func() { errc <- r.l.run() }()
	r.send(qp.SendWithImm, 0, 1, 0)
	f := within(t, "a frame", held)
	waitFor(t, func() bool { p, _ := r.p.postedHeld(); return p == 3 })
	r.drain.Store(true)
	r.p.wake()
	start := time.Now()
	f.Release()
	if err := within(t, "the drained loop's return", errc); !errors.Is(err, errStopped) {
		t.Fatal(err)
	}
	if d := time.Since(start); d < drainLimit/2 {
		t.Errorf("the drain ended after %v with 3 receives posted and no flush", d)
	}
	if posted, held := r.p.postedHeld(); posted != 3 || held != 1 {
		t.Errorf("posted %d held %d after the drain, want 3 and 1 (the released slot not re-posted)", posted, held)
	}
}

// within receives from ch, or fails the test after 10 s with every
// goroutine's stack (a hang here once took the whole run's 10 minutes).
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("no %s after 10 s; goroutines:\n%s", what, buf[:runtime.Stack(buf, true)])
		var zero T
		return zero
	}
}

func (r *simRig) parked() bool {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return r.p.parked
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5 s")
		}
		time.Sleep(50 * time.Microsecond)
	}
}
