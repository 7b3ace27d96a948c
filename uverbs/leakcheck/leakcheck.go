// Package leakcheck finds the pureverbs resources a program forgot to
// close. Every object of the library that owns a file descriptor, a
// mapping or a kernel object (a Context's fds, a completion channel, a
// Buffer, an rxe ring, a PD, MR, CQ, QP, ...) is watched from its creation:
// if it becomes unreachable without its Close, the garbage collector's
// cleanup releases what can safely be released and leakcheck records the
// leak, with the stack that created the object when tracing is on.
//
// A test binary checks for leaks with Main in its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
//
// Main runs the tests, collects garbage until the cleanups of dropped
// objects have run, and fails the binary naming each leaked resource and
// where it was created. A test that drops objects on purpose (to prove the
// cleanups) claims what it leaked with Take.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Leak is one resource that was released by the garbage collector instead
// of by its Close.
type Leak struct {
	What    string // the object, e.g. "uverbs.Context fd 5"
	Created string // the stack that created it; "" unless tracing was on
}

// String names the resource and, when known, where it was created.
func (l Leak) String() string {
	if l.Created == "" {
		return l.What + " (creation not traced)"
	}
	return l.What + ", created at\n" + l.Created
}

var (
	tracing atomic.Bool
	mu      sync.Mutex
	leaks   []Leak
)

// Trace turns the recording of creation stacks on or off for objects
// created from now on. It is off by default (a program pays nothing); Main
// turns it on.
func Trace(on bool) { tracing.Store(on) }

// Take returns the leaks recorded so far and forgets them.
func Take() []Leak {
	mu.Lock()
	defer mu.Unlock()
	l := leaks
	leaks = nil
	return l
}

// record is what a watched object's cleanup knows of it: it must not
// refer to the object itself.
type record struct {
	what string
	pcs  []uintptr
}

func (r *record) leak() {
	l := Leak{What: r.what}
	if len(r.pcs) > 0 {
		var b strings.Builder
		frames := runtime.CallersFrames(r.pcs)
		for {
			f, more := frames.Next()
			fmt.Fprintf(&b, "\t%s\n\t\t%s:%d\n", f.Function, f.File, f.Line)
			if !more {
				break
			}
		}
		l.Created = b.String()
	}
	mu.Lock()
	leaks = append(leaks, l)
	mu.Unlock()
}

// Watch is the cleanup of one resource: it stops the garbage collector's
// release once the owner's Close has released the resource.
type Watch struct{ c runtime.Cleanup }

// Closed tells the watch that the resource was closed: it is no leak, and
// the cleanup must not run.
func (w Watch) Closed() { w.c.Stop() }

// Object watches obj, which owns the resource what describes: once obj is
// unreachable without Closed having been called, release(arg) runs (as
// runtime.AddCleanup; arg must not reach obj) and the leak is recorded.
// release may be nil when nothing can safely be released (a kernel
// object that lives until its context closes, memory slices may still
// point into). Providers of pureverbs objects call it at creation.
func Object[T, A any](obj *T, what string, release func(A), arg A) Watch {
	r := &record{what: what}
	if tracing.Load() {
		pcs := make([]uintptr, 32)
		r.pcs = pcs[:runtime.Callers(2, pcs)]
	}
	return Watch{runtime.AddCleanup(obj, func(a cleanupArg[A]) {
		if a.release != nil {
			a.release(a.arg)
		}
		a.r.leak()
	}, cleanupArg[A]{r, release, arg})}
}

type cleanupArg[A any] struct {
	r       *record
	release func(A)
	arg     A
}

// Tests is what Main runs: *testing.M.
type Tests interface{ Run() int }

// Main runs m with tracing on, then collects garbage until no more
// cleanups run (at most a few seconds) and returns m's exit code, or 1
// when anything leaked, after printing each leak to stderr.
func Main(m Tests) int {
	Trace(true)
	code := m.Run()
	found := Collect(5 * time.Second)
	for _, l := range found {
		fmt.Fprintf(os.Stderr, "leakcheck: released by the garbage collector, never closed: %v\n", l)
	}
	if len(found) > 0 {
		fmt.Fprintf(os.Stderr, "leakcheck: %d resources leaked\n", len(found))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Collect runs the garbage collector until its cleanups have stopped
// finding leaks for a while (or wait has passed) and returns what Take
// returns then.
func Collect(wait time.Duration) []Leak {
	deadline := time.Now().Add(wait)
	quiet := 0
	var got []Leak
	for quiet < 5 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if l := Take(); len(l) > 0 {
			got = append(got, l...)
			quiet = 0
		} else {
			quiet++
		}
	}
	return got
}
