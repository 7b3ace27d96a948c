package main

import (
	"testing"
	"time"
)

// scale maps counter ticks linearly onto the clock between two readings.
func TestStampScale(t *testing.T) {
	o := stampOrigin{count: 1000, nanos: 50}
	f := o.scale(3000, 1050) // 2000 ticks in 1000 ns
	for _, c := range []struct{ ticks, want int64 }{{1000, 50}, {2000, 550}, {3000, 1050}, {5000, 2050}} {
		if got := f(c.ticks); got != c.want {
			t.Errorf("%d ticks: %d ns, want %d", c.ticks, got, c.want)
		}
	}
	if got := o.scale(1000, 2000)(5000); got != 50 {
		t.Errorf("no ticks elapsed: %d, want the origin's 50", got)
	}
}

// Stamps taken around a sleep, once converted, are as far apart as the
// clock says, and a slot never written stays 0. Each stamp is bracketed
// by clock readings, so that a thread descheduled between a stamp and a
// clock reading widens the allowed range instead of failing the test.
func TestStampsToNanos(t *testing.T) {
	t.Logf("counter in use: %v", counterUsable)
	a0 := now()
	ts := []int64{stamp(), 0, 0}
	b0 := now()
	time.Sleep(20 * time.Millisecond)
	a1 := now()
	ts[2] = stamp()
	b1 := now()
	stampsToNanos(ts)
	if ts[1] != 0 {
		t.Errorf("unwritten slot became %d", ts[1])
	}
	// The rate is estimated over the process's life so far; allow it 5 %.
	got, lo, hi := ts[2]-ts[0], a1-b0, b1-a0
	if slack := hi / 20; got < lo-slack || got > hi+slack {
		t.Errorf("stamps %v apart, the clock %v to %v", time.Duration(got), time.Duration(lo), time.Duration(hi))
	}
}
