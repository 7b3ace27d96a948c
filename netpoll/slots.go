//go:build linux

package netpoll

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// kind is what a slot holds.
type kind uint8

const (
	kindNone kind = iota
	kindDgram
	kindStream
	kindCQ
)

// source is one slot of the loop's table.
type source struct {
	kind    kind
	owned   bool // the driver closes fd when the source leaves
	inEpoll bool
	armed   bool // a completion queue armed and not yet signalled
	family  int
	fd      int // the socket, or the completion channel
	gen     uint32
	cq      CompletionQueue
	// out is what Send held back on a stream whose kernel buffer was
	// full, in order; writable says EPOLLOUT is in the epoll set for it.
	// The array is kept (and reused) while the source lives.
	out      []byte
	writable bool
}

func (s *source) socket() bool { return s.kind == kindDgram || s.kind == kindStream }

// slotState is a slot as Add and Remove see it (under Driver.mu).
type slotState uint8

const (
	slotFree slotState = iota
	slotUsed
	slotRemoving // Remove was called; the loop has not closed it yet
	slotClosing  // closed, OnClosed not returned yet: not reusable
)

// op is an addition or removal waiting for the loop.
type op struct {
	remove bool
	index  int
	gen    uint32
	src    source
}

// add reserves a slot, registers the source with epoll and queues it for
// the loop. A reserved slot's generation goes into the epoll event (Pad), so
// an event meant for a slot's previous occupant is recognised and skipped.
func (d *Driver) add(src source) (ConnID, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, errClosed("add")
	}
	var i int
	if n := len(d.free); n > 0 {
		i = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		i = len(d.used)
		d.used = append(d.used, slotFree)
		d.gens = append(d.gens, 0)
	}
	if d.gens[i]++; d.gens[i] == 0 {
		d.gens[i] = 1 // after 2^32 reuses: zero would make a zero ConnID
	}
	src.gen = d.gens[i]
	if d.cfg.usesEpoll() && (src.socket() || d.cfg.sleeps()) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i), Pad: int32(src.gen)}
		if err := unix.EpollCtl(d.ep, unix.EPOLL_CTL_ADD, src.fd, &ev); err != nil {
			d.free = append(d.free, i)
			return 0, fmt.Errorf("netpoll: add fd %d: epoll_ctl: %w", src.fd, err)
		}
		src.inEpoll = true
	}
	d.used[i] = slotUsed
	d.ops = append(d.ops, op{index: i, gen: src.gen, src: src})
	d.pending.Store(true)
	d.signal()
	return newConnID(i, src.gen), nil
}

// applyOps installs and removes what Add and Remove queued. It runs on the
// loop at the start of a pass; handlers it calls may queue more.
func (d *Driver) applyOps() {
	d.mu.Lock()
	ops := d.ops
	d.ops = d.spare[:0]
	d.pending.Store(false)
	d.mu.Unlock()
	for _, o := range ops {
		if !o.remove {
			d.install(o.index, o.src)
			continue
		}
		if s := &d.slots[o.index]; s.kind != kindNone && s.gen == o.gen {
			d.closeSlot(o.index, Removed, nil)
		}
	}
	clear(ops) // drop the completion queues they refer to
	d.mu.Lock()
	d.spare = ops[:0]
	d.mu.Unlock()
}

// install puts src in slot i. Every per-slot table grows here, so that the
// passes themselves never allocate.
func (d *Driver) install(i int, src source) {
	if i >= len(d.slots) {
		d.slots = append(d.slots, make([]source, i+1-len(d.slots))...)
		n := len(d.slots)
		d.socks = slices.Grow(d.socks[:0], n)
		d.cqs = slices.Grow(d.cqs[:0], n)
		d.pq.grow(n)
	}
	d.slots[i] = src
	d.listsStale = true
	d.pq.slotChanged(i)
}

// closeSlot takes the source in slot i out and tells the handler why. The
// slot goes back on the free list only once OnClosed has returned, so no Add
// can hand it out while the handler still hears about its last occupant.
func (d *Driver) closeSlot(i int, reason CloseReason, err error) {
	s := d.slots[i]
	d.mu.Lock()
	d.used[i] = slotClosing
	d.mu.Unlock()
	if s.inEpoll && d.ep >= 0 {
		// Explicitly: closing a duplicated descriptor does not take the file
		// out of the epoll set while another descriptor keeps it open.
		unix.EpollCtl(d.ep, unix.EPOLL_CTL_DEL, s.fd, nil)
	}
	if s.owned {
		unix.Close(s.fd)
	}
	if s.writable {
		d.writers--
	}
	d.slots[i] = source{}
	d.listsStale = true
	d.pq.slotChanged(i)
	d.stats.closes.Add(1)
	defer func() {
		d.mu.Lock()
		d.used[i] = slotFree
		d.free = append(d.free, i)
		d.mu.Unlock()
	}()
	d.h.OnClosed(newConnID(i, s.gen), reason, err)
}

// rebuildLists refreshes the per-kind slot lists after sources came or went.
func (d *Driver) rebuildLists() {
	d.socks, d.cqs = d.socks[:0], d.cqs[:0]
	for i := range d.slots {
		switch {
		case d.slots[i].socket():
			d.socks = append(d.socks, i)
		case d.slots[i].kind == kindCQ:
			d.cqs = append(d.cqs, i)
		}
	}
	d.listsStale = false
}
