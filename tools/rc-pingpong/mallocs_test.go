package main

import (
	"runtime"
	"testing"
)

type allocLoop struct{ sink []*[16]byte }

// run allocates n objects between two snapshots taken inside it.
//
//go:noinline
func (l *allocLoop) run(a *loopAllocs, n int) (before, after int64, err error) {
	if before, err = a.snapshot(); err != nil {
		return
	}
	for range n {
		l.sink = append(l.sink[:0], new([16]byte))
	}
	after, err = a.snapshot()
	return
}

// The counter sees every allocation of the loop function and nothing of
// its own, though it runs inside it.
func TestLoopAllocs(t *testing.T) {
	defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
	l := &allocLoop{sink: make([]*[16]byte, 0, 1)}
	a := newLoopAllocs((*allocLoop).run)
	before, after, err := l.run(a, 37)
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 37 {
		t.Errorf("counted %d allocations of a loop that made 37", after-before)
	}
	if before, after, err = l.run(a, 0); err != nil || after != before {
		t.Errorf("counted %d allocations of a loop that made none (%v)", after-before, err)
	}
}
