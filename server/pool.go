package server

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/qp"
	"golang.org/x/sys/unix"
)

// Slot states. A slot is in exactly one of them; the loop owns the
// transitions except downstream → returned, which Release makes.
const (
	slotIdle       uint32 = iota // out of the receive queue, nobody holds it
	slotPosted                   // in the receive queue
	slotDownstream               // in a Frame not yet released
	slotReturned                 // released, waiting for the loop to re-post it
)

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

	frames [][2]Frame      // two per slot, alternating, so that a stale pointer stays released
	gen    []uint8         // which of the two the slot's next delivery uses
	state  []atomic.Uint32 // slot states
	wrs    []qp.RecvWR     // one prebuilt receive per slot
	posts  []uint32        // times each slot was posted (loop only); see wrID
	sges   []sge

	counts atomic.Uint64 // posted<<32 | held

	mu          sync.Mutex // guards the fields below
	returned    []uint32   // released slots, capacity depth
	nreturned   atomic.Int32
	parked      bool // the loop sleeps in epoll: a Release must wake it
	wakePending bool
	wakeFD      int // eventfd the loop parks on; Close writes it too
	closed      bool
	unmap       func() // frees the slab; run by Close or by the last Release after it
}

// newPool lays out depth slots of size bytes over mem, which the device
// knows at address base under lkey. All slots start idle.
func newPool(mem []byte, base uint64, lkey uint32, size, depth int, unmap func()) (*pool, error) {
	wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("server: eventfd: %w", err)
	}
	p := &pool{
		mem: mem, base: base, lkey: lkey, size: size, depth: depth,
		frames:   make([][2]Frame, depth),
		gen:      make([]uint8, depth),
		state:    make([]atomic.Uint32, depth),
		wrs:      make([]qp.RecvWR, depth),
		posts:    make([]uint32, depth),
		sges:     make([]sge, depth),
		returned: make([]uint32, 0, depth),
		wakeFD:   wfd,
		unmap:    unmap,
	}
	for i := range depth {
		p.sges[i] = sge{Addr: base + uint64(i)*uint64(size), Length: uint32(size), LKey: lkey}
		p.wrs[i] = qp.RecvWR{ID: uint64(i), SGEs: p.sges[i : i+1]}
		for j := range p.frames[i] {
			p.frames[i][j] = Frame{pool: p, slot: uint32(i)}
		}
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

// postedHeld returns the two counts, read together.
func (p *pool) postedHeld() (posted, held int) {
	c := p.counts.Load()
	return int(c >> 32), int(uint32(c))
}

// release queues a slot Release gave back, waking a parked loop. After
// Close it disposes of the slot instead, and the last one frees the slab.
func (p *pool) release(slot uint32) {
	p.mu.Lock()
	if p.closed {
		p.state[slot].Store(slotIdle)
		last := uint32(p.counts.Add(^uint64(0))) == 0 // held-1
		p.mu.Unlock()
		if last {
			p.freeSlab()
		}
		return
	}
	p.state[slot].Store(slotReturned)
	p.returned = append(p.returned, slot)
	p.nreturned.Store(int32(len(p.returned)))
	if p.parked && !p.wakePending {
		p.wakePending = true
		p.signal()
	}
	p.mu.Unlock()
}

// signal makes the wake eventfd readable. The caller holds mu.
func (p *pool) signal() {
	one := [8]byte{1}
	unix.Write(p.wakeFD, one[:])
}

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
		var buf [8]byte
		unix.Read(p.wakeFD, buf[:])
		return false
	}
	if len(p.returned) > 0 || stop.Load() {
		return false
	}
	p.parked = true
	return true
}

// unpark drains the wake eventfd after the loop woke up.
func (p *pool) unpark() {
	p.mu.Lock()
	p.parked, p.wakePending = false, false
	var buf [8]byte
	unix.Read(p.wakeFD, buf[:])
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
	for i := range p.state {
		if p.state[i].CompareAndSwap(slotPosted, slotIdle) {
			n++
		}
	}
	p.counts.Add(toHeld * uint64(n))
}

// close stops taking slots back: from now on Release disposes of them. The
// slab is freed now if nothing is held, or by the last Release. Slots
// still posted or queued count as disposed (their QP is gone).
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	unix.Close(p.wakeFD)
	held := 0
	for i := range p.state {
		if p.state[i].Load() == slotDownstream {
			held++
		} else {
			p.state[i].Store(slotIdle)
		}
	}
	p.returned = p.returned[:0]
	p.nreturned.Store(0)
	p.counts.Store(uint64(held))
	p.mu.Unlock()
	if held == 0 {
		p.freeSlab()
	}
}

// freeSlab runs unmap once.
func (p *pool) freeSlab() {
	p.mu.Lock()
	f := p.unmap
	p.unmap = nil
	p.mu.Unlock()
	if f != nil {
		f()
	}
}

// deliver turns a filled slot into the Frame for downstream.
func (p *pool) deliver(slot uint32, n int, imm uint32) *Frame {
	g := p.gen[slot]
	p.gen[slot] = g + 1
	f := &p.frames[slot][g&1]
	off := int(slot) * p.size
	f.data = p.mem[off : off+n : off+n]
	f.channel = uint8(imm)
	f.position = imm >> 8
	p.state[slot].Store(slotDownstream)
	f.held.Store(true)
	return f
}
