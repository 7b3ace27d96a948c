//go:build linux

package netpoll

import "slices"

const (
	// refreshEvery: every this many passes per-queue forgets every cached
	// NAPI id and asks each socket again, so a queue that RSS moved under a
	// live socket is relearned.
	refreshEvery = 4096
	// relookEvery: while some socket's queue is still unknown, look again
	// this often (asking every pass would cost a getsockopt per unknown
	// socket per pass; those sockets are read every pass meanwhile anyway).
	relookEvery = 64
)

// perQueue chooses RecvBusy+PerQueue's representatives: one socket per NAPI
// id plus every socket whose NAPI id is unknown (0).
type perQueue struct {
	napi   []uint32 // per slot: the cached NAPI id, 0 while unknown
	polled []bool   // per slot: a representative, read every pass
	reps   []int    // the representatives, in slot order
	seen   []uint32 // scratch: the NAPI ids already represented
	// changed: a source came or went, so the representatives are rebuilt
	// before the next read.
	changed bool
	// rebind: the cached ids are stale and must all be asked again. A
	// socket joining or leaving sets it: a reused slot must not keep the
	// previous connection's id, or the newcomer is judged to share the old
	// queue, is never a representative and its own queue is never polled.
	rebind  bool
	unknown bool // some live socket's queue is still unknown
	passes  uint64
}

// grow sizes the per-slot tables for n slots (outside passes).
func (q *perQueue) grow(n int) {
	q.napi = append(q.napi, make([]uint32, n-len(q.napi))...)
	q.polled = append(q.polled, make([]bool, n-len(q.polled))...)
	q.reps = slices.Grow(q.reps, n)
	q.seen = slices.Grow(q.seen, n)
}

// slotChanged records that slot i got a new occupant or lost one.
func (q *perQueue) slotChanged(i int) {
	q.changed = true
	q.rebind = true
	if i < len(q.napi) {
		q.napi[i] = 0
	}
}

// refresh rebuilds the representatives when needed, once per pass.
func (q *perQueue) refresh(d *Driver) {
	q.passes++
	periodic := q.passes%refreshEvery == 0
	if q.changed || periodic || (q.unknown && q.passes%relookEvery == 0) {
		q.pick(d.slots, q.rebind || periodic)
	}
}

// pick chooses one socket per known NAPI id and every socket with an
// unknown one. forgetAll drops every cached id first: only asking for the
// ids still unknown would never correct one that went stale.
func (q *perQueue) pick(slots []source, forgetAll bool) {
	if forgetAll {
		q.rebind = false
		clear(q.napi)
	}
	clear(q.polled)
	q.reps = q.reps[:0]
	q.seen = q.seen[:0]
	q.unknown = false
	for i := range slots {
		s := &slots[i]
		if !s.socket() {
			q.napi[i] = 0
			continue
		}
		if q.napi[i] == 0 {
			q.napi[i] = incomingNAPIID(s.fd)
		}
		switch id := q.napi[i]; {
		case id == 0:
			q.unknown = true
		case slices.Contains(q.seen, id):
			continue
		default:
			q.seen = append(q.seen, id)
		}
		q.polled[i] = true
		q.reps = append(q.reps, i)
	}
	q.changed = false
}
