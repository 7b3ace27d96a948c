//go:build linux

package netpoll

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// pass is one loop iteration. Nothing on the paths where sources stay open
// allocates; errors returned from here end the loop.
func (d *Driver) pass() error {
	if d.pending.Load() {
		d.applyOps()
	}
	if d.listsStale {
		d.rebuildLists()
	}
	d.stats.passes.Add(1)
	got := d.drainCQs()
	switch d.cfg.Backend {
	case EpollSpin:
		_, err := d.waitAndRead(false, nil, false)
		return err
	case EpollBusy:
		if got == 0 && d.armCQs() == 0 {
			_, err := d.waitAndRead(true, &d.waitTS, false)
			return err
		}
		// Completions keep the loop from sleeping, and epoll busy-polls only
		// in a wait that may sleep (a zero timeout returns first): poll each
		// socket queue once with a non-blocking read instead.
		return d.perQueuePass()
	case RecvBusy:
		if d.cfg.PerQueue {
			return d.perQueuePass()
		}
		for _, i := range d.socks {
			d.recvSlot(i)
		}
		if d.writers > 0 {
			d.flushAll()
		}
		return nil
	case Park:
		return d.parkPass(got > 0)
	}
	return nil
}

// perQueuePass reads one socket per NIC queue (with SO_BUSY_POLL set, each
// empty read runs one NAPI pass of its queue), then serves what epoll
// reports ready and was not read already.
func (d *Driver) perQueuePass() error {
	d.pq.refresh(d)
	for _, i := range d.pq.reps {
		d.recvSlot(i)
	}
	_, err := d.waitAndRead(false, nil, true)
	return err
}

// parkPass spins while data flows and, after ParkAfter empty passes, arms
// the completion queues, polls them once more and blocks.
func (d *Driver) parkPass(progress bool) error {
	busy, err := d.waitAndRead(false, nil, false)
	if err != nil {
		return err
	}
	if progress || busy {
		d.empty = 0
		return nil
	}
	if d.empty++; d.empty < d.cfg.ParkAfter {
		return nil
	}
	d.empty = 0
	if d.armCQs() > 0 {
		return nil
	}
	_, err = d.waitAndRead(true, d.parkTS, false)
	return err
}

// waitAndRead collects epoll events, sleeping up to ts (nil: without limit)
// if sleep is set, and serves them. skipPolled skips the sockets per-queue
// already read this pass. It reports whether any source had work.
func (d *Driver) waitAndRead(sleep bool, ts *unix.Timespec, skipPolled bool) (bool, error) {
	d.stats.epollWaits.Add(1)
	var n int
	var e unix.Errno
	if !sleep {
		n, e = epollWaitNow(d.ep, d.events)
	} else {
		d.stats.parks.Add(1) // counted on entry: a long sleep shows at once
		start := time.Now()
		n, e = epollPwait2(d.ep, d.events, ts)
		d.stats.parkedNS.Add(uint64(time.Since(start)))
	}
	if e == unix.EINTR {
		return false, nil
	}
	if e != 0 {
		return false, fmt.Errorf("netpoll: epoll wait: %w", e)
	}
	progress := false
	for k := range n {
		ev := &d.events[k]
		if ev.Fd == wakeIndex {
			d.wake.reset()
			progress = true
			continue
		}
		i := int(ev.Fd)
		if i < 0 || i >= len(d.slots) {
			continue
		}
		s := &d.slots[i]
		if s.gen != uint32(ev.Pad) {
			continue // the slot's previous occupant, or one not installed yet
		}
		switch {
		case s.kind == kindCQ:
			d.consumeCQ(i)
			progress = true
		case s.socket():
			if ev.Events&unix.EPOLLOUT != 0 && s.writable {
				d.flushSlot(i)
				progress = true
				if s.kind == kindNone || ev.Events&^unix.EPOLLOUT == 0 {
					continue // closed by a failed write, or only writable
				}
			}
			if skipPolled && d.pq.polled[i] {
				continue // read already; anything left is reported again
			}
			if d.recvSlot(i) {
				progress = true
			}
		}
	}
	return progress, nil
}

// recvSlot makes one non-blocking read of the socket in slot i and reports
// whether it delivered data. A failing read closes that source.
func (d *Driver) recvSlot(i int) bool {
	s := &d.slots[i]
	if !s.socket() {
		return false
	}
	n, e := d.rx.recv(s.fd)
	d.stats.reads.Add(1)
	switch e {
	case 0:
		if n == 0 && s.kind == kindStream {
			d.closeSlot(i, PeerClosed, nil)
			return false
		}
		if s.kind == kindDgram {
			d.h.OnData(newConnID(i, s.gen), d.rx.buf[:n], d.rx.from())
		} else {
			d.h.OnData(newConnID(i, s.gen), d.rx.buf[:n], netip.AddrPort{})
		}
		return true
	case unix.EAGAIN, unix.EINTR:
		d.stats.emptyReads.Add(1)
		return false
	}
	d.closeSlot(i, Failed, os.NewSyscallError("recvmsg", e))
	return false
}

// drainCQs polls every completion queue from memory.
func (d *Driver) drainCQs() int {
	total := 0
	for _, i := range d.cqs {
		s := &d.slots[i]
		if s.kind != kindCQ {
			continue
		}
		n, err := s.cq.Drain()
		if err != nil {
			d.closeSlot(i, Failed, fmt.Errorf("netpoll: completion queue drain: %w", err))
			continue
		}
		total += n
	}
	if total > 0 {
		d.stats.completions.Add(uint64(total))
	}
	return total
}

// armCQs arms every completion queue not armed yet, then drains them all
// again: a completion that arrived before its queue was armed raises no
// event, so a sleep is only safe if this finds nothing.
func (d *Driver) armCQs() int {
	if len(d.cqs) == 0 {
		return 0
	}
	for _, i := range d.cqs {
		s := &d.slots[i]
		if s.kind != kindCQ || s.armed {
			continue
		}
		if err := s.cq.Arm(); err != nil {
			d.closeSlot(i, Failed, fmt.Errorf("netpoll: completion queue arm: %w", err))
			continue
		}
		s.armed = true
	}
	return d.drainCQs()
}

// consumeCQ acknowledges a completion channel event; the next pass drains
// the queue, and the next sleep arms it again.
func (d *Driver) consumeCQ(i int) {
	s := &d.slots[i]
	s.armed = false
	if err := s.cq.Consume(); err != nil {
		d.closeSlot(i, Failed, fmt.Errorf("netpoll: completion channel: %w", err))
	}
}
