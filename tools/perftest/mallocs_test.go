package main

import (
	"runtime"
	"testing"
)

// loopAllocSites counts what a bwRun or latRun method allocates and nothing
// else: an error built by stallError counts, the address arithmetic of
// nextAddr and allocations outside the loop types do not.
func TestLoopAllocs(t *testing.T) {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	r := &bwRun{o: &options{}, size: 64, e: &end{line: 64, cycle: 4096}}
	before := allocTotal(loopAllocSites())
	var sink []byte
	for range 10 {
		sink = make([]byte, 100+len(sink)) // not in a loop method
		r.nextAddr(0, 3, 0)
	}
	if d := allocTotal(loopAllocSites()) - before; d != 0 {
		t.Fatalf("counted %d allocations outside the loop types", d)
	}
	before = allocTotal(loopAllocSites())
	for i := range 10 {
		if r.stallError("received", i, 10) == nil {
			t.Fatal("no error")
		}
	}
	if d := allocTotal(loopAllocSites()) - before; d < 10 {
		t.Fatalf("counted %d allocations for 10 errors built in a bwRun method", d)
	}
	_ = sink
}
