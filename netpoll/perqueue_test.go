//go:build linux

package netpoll

import (
	"slices"
	"testing"
)

// perQueueDriver is a RecvBusy+PerQueue driver with two loopback UDP
// sockets, installed by one pass.
func perQueueDriver(t *testing.T) (*Driver, ConnID, ConnID) {
	t.Helper()
	d := newDriver(t, Config{Backend: RecvBusy, PerQueue: true}, &recorder{})
	a := addConn(t, d, udpListen(t))
	b := addConn(t, d, udpListen(t))
	if err := d.Poll(); err != nil {
		t.Fatal(err)
	}
	return d, a, b
}

// Seed bug 1: a slot reused for a connection on another queue must drop the
// previous connection's NAPI id. Otherwise the newcomer is judged to share
// the old queue, is never a representative, and its own queue is never
// busy-polled.
func TestPerQueueReusedSlotDropsOldNAPIID(t *testing.T) {
	d, a, b := perQueueDriver(t)
	// The cache says both sockets are on queue 5: only the first is read.
	for i := range d.pq.napi {
		d.pq.napi[i] = 5
	}
	d.pq.rebind = false
	d.pq.pick(d.slots, false)
	if !slices.Equal(d.pq.reps, []int{a.slot()}) {
		t.Fatalf("representatives %v, want [%d]", d.pq.reps, a)
	}

	// b leaves; its slot goes to a connection that is on another queue.
	if err := d.Remove(b); err != nil {
		t.Fatal(err)
	}
	d.applyOps()
	c := addConn(t, d, udpListen(t))
	if c.slot() != b.slot() {
		t.Fatalf("new source got slot %d, want the reused %d", c.slot(), b.slot())
	}
	d.applyOps()
	if d.pq.napi[c.slot()] != 0 {
		t.Errorf("the reused slot kept the previous connection's NAPI id %d", d.pq.napi[c.slot()])
	}
	if !d.pq.rebind || !d.pq.changed {
		t.Errorf("the cache is not marked stale (rebind %v, changed %v)", d.pq.rebind, d.pq.changed)
	}
	d.pq.pick(d.slots, d.pq.rebind)
	if !slices.Contains(d.pq.reps, c.slot()) {
		t.Errorf("the newcomer is not a representative: %v", d.pq.reps)
	}
}

// Seed bug 2: the periodic refresh must forget every cached id (a NIC can
// move a queue under a live socket), not only fill in unknown ones.
func TestPerQueueRefreshForgetsEveryID(t *testing.T) {
	d, a, b := perQueueDriver(t)
	stale := func() {
		for i := range d.pq.napi {
			d.pq.napi[i] = 9
		}
		d.pq.rebind, d.pq.changed, d.pq.unknown = false, false, false
		d.pq.reps = append(d.pq.reps[:0], a.slot())
		clear(d.pq.polled)
		d.pq.polled[a.slot()] = true
	}
	stale()
	d.pq.pick(d.slots, true)
	for i, id := range d.pq.napi {
		if id != 0 { // loopback sockets have no NAPI id: the real answer is 0
			t.Errorf("slot %d kept the stale id %d through a refresh", i, id)
		}
	}

	// The same through the pass counter: the stale cache survives until
	// the 4096th pass, which relearns every id.
	stale()
	for d.pq.passes%refreshEvery != refreshEvery-1 {
		if err := d.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if d.pq.napi[a.slot()] != 9 || slices.Contains(d.pq.reps, b.slot()) {
		t.Fatalf("the cache changed before the refresh: napi %v reps %v", d.pq.napi, d.pq.reps)
	}
	if err := d.Poll(); err != nil {
		t.Fatal(err)
	}
	if d.pq.napi[a.slot()] != 0 || d.pq.napi[b.slot()] != 0 || !slices.Contains(d.pq.reps, b.slot()) {
		t.Errorf("the periodic refresh kept stale ids: napi %v reps %v", d.pq.napi, d.pq.reps)
	}
}

// Sockets whose queue is unknown are all read, and CQs are never
// representatives.
func TestPerQueueUnknownAllRead(t *testing.T) {
	d, a, b := perQueueDriver(t)
	cq := newFakeCQ(t)
	id, err := d.AddCQ(cq)
	if err != nil {
		t.Fatal(err)
	}
	d.Poll()
	if !slices.Equal(d.pq.reps, []int{a.slot(), b.slot()}) || d.pq.polled[id.slot()] {
		t.Errorf("representatives %v (cq %d polled %v), want both sockets", d.pq.reps, id, d.pq.polled[id.slot()])
	}
	if !d.pq.unknown {
		t.Errorf("unknown ids not noted")
	}
}
