package main

import (
	"fmt"
	"io"
	"reflect"
	"runtime"
)

// loopAllocs counts the heap allocations made by one function and
// everything it calls (the exchange loop), from the memory profile with
// every allocation sampled: the runtime's own background work (starting
// an OS thread, finalizers, the scavenger's timer) allocates at times of
// its choosing and is not the loop's. What snapshot itself allocates is
// left out, so it can be taken from inside the loop.
type loopAllocs struct {
	entry uintptr // entry PC of the loop function
	self  uintptr // entry PC of snapshot, whose own allocations (FuncForPC's) do not count
	recs  []runtime.MemProfileRecord
	sites [64]allocSite // the loop's allocation sites at the last snapshot
	nsite int
	total int64
}

type allocSite struct {
	stack [32]uintptr
	n     int64
	once  bool // a runtime cache filled the first time a call site meets a type
}

// newLoopAllocs starts sampling every allocation; loop is the function
// whose allocations count (such as pingpong.Loop).
func newLoopAllocs(loop any) *loopAllocs {
	runtime.MemProfileRate = 1
	return &loopAllocs{
		entry: runtime.FuncForPC(reflect.ValueOf(loop).Pointer()).Entry(),
		self:  runtime.FuncForPC(reflect.ValueOf((*loopAllocs).snapshot).Pointer()).Entry(),
		recs:  make([]runtime.MemProfileRecord, 1<<14),
	}
}

// snapshot records the loop's allocations so far (after two collections,
// which publish the profile) and returns how many there were, not counting
// the runtime's one-time type-switch caches.
func (a *loopAllocs) snapshot() (int64, error) {
	runtime.GC()
	runtime.GC()
	n, ok := runtime.MemProfile(a.recs, true)
	if !ok {
		return 0, fmt.Errorf("memory profile has more than %d records", len(a.recs))
	}
	a.nsite, a.total = 0, 0
	for i := range a.recs[:n] {
		r := &a.recs[i]
		inLoop, once, self := false, false, false
		for _, pc := range r.Stack() {
			f := runtime.FuncForPC(pc - 1)
			if f == nil {
				continue
			}
			switch f.Entry() {
			case a.entry:
				inLoop = true
			case a.self:
				self = true
			}
			if name := f.Name(); name == "runtime.buildInterfaceSwitchCache" || name == "runtime.buildTypeAssertCache" {
				once = true
			}
		}
		if !inLoop || self || r.AllocObjects == 0 {
			continue
		}
		if a.nsite == len(a.sites) {
			return 0, fmt.Errorf("the loop allocates at more than %d places", len(a.sites))
		}
		a.sites[a.nsite] = allocSite{stack: r.Stack0, n: r.AllocObjects, once: once}
		a.nsite++
		if !once {
			a.total += r.AllocObjects
		}
	}
	return a.total, nil
}

// report writes the allocation sites whose count grew since before (an
// earlier snapshot's copy), with their stacks.
func (a *loopAllocs) report(w io.Writer, before *loopAllocs) {
	for _, s := range a.sites[:a.nsite] {
		d := s.n
		for _, b := range before.sites[:before.nsite] {
			if b.stack == s.stack {
				d -= b.n
			}
		}
		if d <= 0 {
			continue
		}
		kind := "allocations"
		if s.once {
			kind = "allocations of a runtime type-switch cache (once per call site and type; not counted)"
		}
		fmt.Fprintf(w, "rc-pingpong: %d %s at:\n", d, kind)
		frames := runtime.CallersFrames(s.stack[:])
		for {
			f, more := frames.Next()
			if f.Function != "" {
				fmt.Fprintf(w, "\t%s %s:%d\n", f.Function, f.File, f.Line)
			}
			if !more {
				break
			}
		}
	}
}
