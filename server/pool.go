package server

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs/fdwait"
)

// Slot states. A slot is in exactly one of them. Every transition is a
// pool method, called by the loop except downstream → returned, which
// Release makes:
//
//	idle → posted          recvWR, then markPosted once the QP took it
//	posted → idle          completed (a receive completion), unpostAll
//	idle → downstream      deliver (a good receive: a Frame)
//	downstream → returned  release (Frame.Release)
//	returned → posted      takeReturned, then as idle
//
// The loop decides which one happens (a bad completion is re-posted, a
// flush leaves the slot idle for the next connection).
const (
	slotIdle       uint64 = iota // out of the receive queue, nobody holds it
	slotPosted                   // in the receive queue
	slotDownstream               // in a Frame not yet released
	slotReturned                 // released, waiting for the loop to re-post it
)

// slotWord is a slot's state (low 2 bits) and its delivery generation (the
// rest), in one word, so that a Release names the delivery it releases: a
// Frame from an earlier delivery of the slot no longer matches the word.
type slotWord struct{ w atomic.Uint64 }

const stateBits = 3

// state is the slot's state.
func (s *slotWord) state() uint64 { return s.w.Load() & stateBits }

// is reports whether the slot is in state st of delivery gen.
func (s *slotWord) is(gen, st uint64) bool { return s.w.Load() == gen<<2|st }

// move changes the state from `from` to `to`, keeping the generation; it
// reports false (and changes nothing) when the slot is not in `from`.
func (s *slotWord) move(from, to uint64) bool {
	for {
		w := s.w.Load()
		if w&stateBits != from {
			return false
		}
		if s.w.CompareAndSwap(w, w&^stateBits|to) {
			return true
		}
	}
}

// set puts the slot in state st, keeping the generation.
func (s *slotWord) set(st uint64) {
	for {
		w := s.w.Load()
		if s.w.CompareAndSwap(w, w&^stateBits|st) {
			return
		}
	}
}

// deliver starts the slot's next delivery (from idle) and returns its
// generation.
func (s *slotWord) deliver() uint64 {
	gen := s.w.Load()>>2 + 1
	s.w.Store(gen<<2 | slotDownstream)
	return gen
}

// Counts packs the number of posted slots (high half) and held slots (low
// half) into one word, so that a slot moves between them in one atomic add
// and posted + held == depth at every instant.
var (
	postedOne uint64 = 1 << 32
	toHeld           = 1 - postedOne // posted-1, held+1 (wraps on purpose)
	toPosted         = postedOne - 1
)

// pool is the receive slab cut into depth slots of size bytes, the Frames
// that carry them downstream, and the queue of released slots. It outlives
// every connection: a new QP re-posts the same slots.
type pool struct {
	mem   []byte // the slab
	base  uint64 // its address in the MR
	lkey  uint32
	size  int
	depth int

	slots []slotWord  // slot states and generations
	wrs   []qp.RecvWR // one prebuilt receive per slot
	posts []uint32    // times each slot was posted (loop only); see wrID
	sges  []sge

	counts atomic.Uint64 // posted<<32 | held
	stale  atomic.Uint64 // Releases of stale Frames

	mu          sync.Mutex // guards the fields below
	returned    []uint32   // released slots, capacity depth
	nreturned   atomic.Int32
	parked      bool // the loop sleeps in waiter: a Release must wake it
	wakePending bool
	// waiter is what the loop parks on (the CQ's channel fd) and what a
	// Release or Close wakes it with.
	waiter *fdwait.Poller
	closed bool
	unmap  func() error // frees the slab; run by Close or by the last Release after it
}

// newPool lays out depth slots of size bytes over mem, which the device
// knows at address base under lkey. All slots start idle. The loop parks
// on eventFD, the CQ channel's, for the server's life.
func newPool(mem []byte, base uint64, lkey uint32, size, depth, eventFD int, unmap func() error) (*pool, error) {
	// Ppoll: the loop's wake-up is a completion's, on the hot path (see
	// package fdwait). The channel is registered once, so that each park
	// is one epoll_pwait2 rather than a ppoll that builds its poll table
	// again.
	w, err := fdwait.NewRegistered(eventFD)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	p := &pool{
		mem: mem, base: base, lkey: lkey, size: size, depth: depth,
		slots:    make([]slotWord, depth),
		wrs:      make([]qp.RecvWR, depth),
		posts:    make([]uint32, depth),
		sges:     make([]sge, depth),
		returned: make([]uint32, 0, depth),
		waiter:   w,
		unmap:    unmap,
	}
	for i := range depth {
		p.sges[i] = sge{Addr: base + uint64(i)*uint64(size), Length: uint32(size), LKey: lkey}
		p.wrs[i] = qp.RecvWR{ID: uint64(i), SGEs: p.sges[i : i+1]}
	}
	p.counts.Store(uint64(depth)) // all held (not posted) until the first connection
	return p, nil
}

// wrID numbers a slot's next receive: the slot in the low half, how many
// times it has been posted in the high half. A completion names the receive
// it completes, so one repeated, or left over from a receive the slot no
// longer has, is told from the slot's current one (see posted) and cannot
// make the loop re-post a slot that is still in the receive queue.
func (p *pool) wrID(slot uint32) uint64 {
	p.posts[slot]++
	return uint64(p.posts[slot])<<32 | uint64(slot)
}

// posted returns the slot whose current receive id names, if any.
func (p *pool) posted(id uint64) (uint32, bool) {
	slot := uint32(id)
	if int64(slot) >= int64(p.depth) || uint32(id>>32) != p.posts[slot] {
		return 0, false
	}
	return slot, true
}

// recvWR is slot's next receive: its prebuilt work request under a new
// id (see wrID). The slot is idle until markPosted.
func (p *pool) recvWR(slot uint32) qp.RecvWR {
	wr := p.wrs[slot]
	wr.ID = p.wrID(slot)
	return wr
}

// markPosted moves slots, whose receives the QP took, from idle to
// posted.
func (p *pool) markPosted(slots []uint32) {
	for _, s := range slots {
		p.slots[s].set(slotPosted)
	}
	p.counts.Add(toPosted * uint64(len(slots)))
}

// completed takes the slot a receive completion names out of the receive
// queue (posted to idle, counted as held); false for an id that names no
// receive the pool has posted (a repeated or stale completion).
func (p *pool) completed(id uint64) (uint32, bool) {
	slot, ok := p.posted(id)
	if !ok || !p.slots[slot].move(slotPosted, slotIdle) {
		return 0, false
	}
	p.counts.Add(toHeld)
	return slot, true
}

// idleSlots appends the slots nobody holds to dst.
func (p *pool) idleSlots(dst []uint32) []uint32 {
	for i := range p.slots {
		if p.slots[i].state() == slotIdle {
			dst = append(dst, uint32(i))
		}
	}
	return dst
}

// postedHeld returns the two counts, read together.
func (p *pool) postedHeld() (posted, held int) {
	c := p.counts.Load()
	return int(c >> 32), int(uint32(c))
}

// release queues a slot Release gave back from delivery gen, waking a
// parked loop; a stale gen (the delivery was released before) changes
// nothing. After Close it disposes of the slot instead, and the last one
// frees the slab.
func (p *pool) release(slot uint32, gen uint64) {
	p.mu.Lock()
	to := slotReturned
	if p.closed {
		to = slotIdle
	}
	if !p.slots[slot].w.CompareAndSwap(gen<<2|slotDownstream, gen<<2|to) {
		p.mu.Unlock()
		p.stale.Add(1)
		return
	}
	if p.closed {
		last := uint32(p.counts.Add(^uint64(0))) == 0 // held-1
		p.mu.Unlock()
		if last {
			// The unmap fails only while the slab is still registered,
			// that is after an MR deregistration that failed, which
			// Server.Close has returned already; Release has no caller
			// to tell.
			_ = p.freeSlab()
		}
		return
	}
	p.returned = append(p.returned, slot)
	p.nreturned.Store(int32(len(p.returned)))
	if p.parked && !p.wakePending {
		p.wakePending = true
		p.signal()
	}
	p.mu.Unlock()
}

// signal wakes the loop's wait, or its next one. The caller holds mu.
func (p *pool) signal() { p.waiter.Wake() }

// takeReturned appends the released slots to dst and empties the queue.
func (p *pool) takeReturned(dst []uint32) []uint32 {
	if p.nreturned.Load() == 0 {
		return dst
	}
	p.mu.Lock()
	dst = append(dst, p.returned...)
	p.returned = p.returned[:0]
	p.nreturned.Store(0)
	p.mu.Unlock()
	return dst
}

// park reports whether the loop may sleep: nothing is waiting to be
// re-posted and the server is not closing. From then on a Release wakes it.
func (p *pool) park(stop *atomic.Bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wakePending {
		// A wake arrived while the loop was busy: take it now.
		p.wakePending = false
		p.waiter.ClearWake()
		return false
	}
	if len(p.returned) > 0 || stop.Load() {
		return false
	}
	p.parked = true
	return true
}

// unpark takes back a wake that came while the loop was waking up.
func (p *pool) unpark() {
	p.mu.Lock()
	p.parked, p.wakePending = false, false
	p.waiter.ClearWake()
	p.mu.Unlock()
}

// wake wakes the loop whatever it is doing (for Close and session ends).
func (p *pool) wake() {
	p.mu.Lock()
	if !p.closed {
		p.wakePending = true
		p.signal()
	}
	p.mu.Unlock()
}

// unpostAll marks every slot still posted on a destroyed QP idle, so that
// the next connection posts it again.
func (p *pool) unpostAll() {
	n := 0
	for i := range p.slots {
		if p.slots[i].move(slotPosted, slotIdle) {
			n++
		}
	}
	p.counts.Add(toHeld * uint64(n))
}

// close stops taking slots back: from now on Release disposes of them. The
// slab is freed now if nothing is held (the error is the unmap's), or by
// the last Release. Slots still posted or queued count as disposed (their
// QP is gone).
func (p *pool) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.waiter.Close()
	held := 0
	for i := range p.slots {
		if p.slots[i].state() == slotDownstream {
			held++
		} else {
			p.slots[i].set(slotIdle)
		}
	}
	p.returned = p.returned[:0]
	p.nreturned.Store(0)
	p.counts.Store(uint64(held))
	p.mu.Unlock()
	if held == 0 {
		return p.freeSlab()
	}
	return nil
}

// freeSlab runs unmap once.
func (p *pool) freeSlab() error {
	p.mu.Lock()
	f := p.unmap
	p.unmap = nil
	p.mu.Unlock()
	if f != nil {
		return f()
	}
	return nil
}

// deliver turns a filled (idle) slot into the Frame for downstream: the
// slot's next generation.
func (p *pool) deliver(slot uint32, n int, imm uint32) Frame {
	off := int(slot) * p.size
	return Frame{
		pool: p, slot: slot, channel: uint8(imm), position: imm >> 8,
		data: p.mem[off : off+n : off+n],
		gen:  p.slots[slot].deliver(),
	}
}

// requeue puts slots whose post failed back where the next post finds
// them: idle (they stay counted as held, as they were).
func (p *pool) requeue(slots []uint32) {
	for _, s := range slots {
		p.slots[s].set(slotIdle)
	}
}
