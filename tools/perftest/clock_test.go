package main

import (
	"testing"
	"time"
)

func TestStallWatch(t *testing.T) {
	old := stallLimit
	stallLimit = 30 * time.Millisecond
	defer func() { stallLimit = old }()

	// An idle loop stalls once stallLimit has passed, not before.
	var s stallWatch
	start := time.Now()
	for !s.stalled() {
	}
	if d := time.Since(start); d < stallLimit || d > stallLimit+2*time.Second {
		t.Fatalf("stalled after %v, want about %v", d, stallLimit)
	}

	// A loop that completes something now and then never stalls, however
	// long it runs in all. A completion every 1000 passes keeps the watch
	// from ever looking at the clock, so a loaded host that deschedules the
	// test cannot fake a stall; a progress that does not reset the count
	// still fails here.
	s = stallWatch{}
	start = time.Now()
	for i := 0; time.Since(start) < 4*stallLimit; i++ {
		if i%1000 == 0 {
			s.progress()
		}
		if s.stalled() {
			t.Fatalf("stalled after %v with a completion every 1000 passes", time.Since(start))
		}
	}

	// After a completion the idle time counts afresh.
	for !s.stalled() {
	}
	s.progress()
	time.Sleep(2 * stallLimit)
	for range 8191 {
		if s.stalled() {
			t.Fatal("stalled right after a completion")
		}
	}
}
