package main

import (
	"runtime"
	"time"
)

// epoch is the origin of now's timestamps.
var epoch = time.Now()

// now is the monotonic clock in nanoseconds: the run's own timing (timed
// runs, yields, the stall watch) and, where the CPU's counter cannot be
// used, the messages' stamps. It allocates nothing.
func now() int64 { return int64(time.Since(epoch)) }

// durationState is perftest's DurationStates: a timed run warms up for
// the margin, samples for duration − 2·margin, cools down for the margin,
// and ends.
type durationState int

const (
	stateStart durationState = iota
	stateSample
	stateStopSample
	stateEnd
)

// durationClock is a timed run's state machine (perftest's SIGALRM
// handler). The loop that asks for the state moves it on when its time
// has come, so no timer, goroutine or allocation is involved.
type durationClock struct {
	state         durationState
	next          int64 // when the state changes next; 0 before start
	sampleStart   int64
	sampleStop    int64
	margin, whole int64 // nanoseconds
}

func newDurationClock(o *options) *durationClock {
	return &durationClock{margin: int64(o.margin) * int64(time.Second), whole: int64(o.duration) * int64(time.Second)}
}

// start begins the warm-up.
func (c *durationClock) start() {
	c.state, c.next = stateStart, now()+c.margin
	c.current()
}

// current is the state now, after any transitions that are due.
func (c *durationClock) current() durationState {
	if c.next == 0 || c.state == stateEnd {
		return c.state
	}
	for t := now(); c.state != stateEnd && t >= c.next; {
		switch c.state {
		case stateStart:
			c.sampleStart = c.next
			c.state, c.next = stateSample, c.next+c.whole-2*c.margin
		case stateSample:
			c.sampleStop = c.next
			c.state, c.next = stateStopSample, c.next+c.margin
		case stateStopSample:
			c.state = stateEnd
		}
	}
	return c.state
}

// stop ends the run at once.
func (c *durationClock) stop() { c.state = stateEnd }

// yieldEvery is how long a measured loop runs before it passes through
// the Go scheduler once. A goroutine that runs 10 ms without doing so is
// preempted by the runtime's monitor thread with a signal (SIGURG via
// tgkill): in the VM that signal, its handler and the rescheduling cost
// the vCPUs that rxe and the peer need (seen in a CPU profile of the
// spinning client: runtime.asyncPreempt 22-25 % of its samples; strace:
// 184 tgkill for 5 000 sends). Yielding first, voluntarily, is cheaper,
// but not free: with a second P (waitprocs) a yield wakes a thread to
// look for work. So the loop yields as seldom as it can and still be
// ahead of the monitor: at 2 ms, ib_read_bw's Go client at 64 B ran 230
// more kernel instructions per message, in the scheduler and the
// netpoller's epoll wait (make profile-insn), than at 8 ms.
const yieldEvery = 8 * time.Millisecond

// yielder makes a spinning loop yield to the scheduler every yieldEvery,
// reading the clock only every 16 calls.
type yielder struct {
	calls int
	last  int64
}

// maybe yields when yieldEvery has passed since the last time.
func (y *yielder) maybe() {
	y.calls++
	if y.calls&15 != 0 {
		return
	}
	if t := now(); t-y.last >= int64(yieldEvery) {
		y.last = t
		runtime.Gosched()
	}
}

// stallWatch tells a spinning loop that nothing has completed for
// stallLimit. It reads the clock only while the loop is idle — at the
// 4096th empty pass in a row and every 4096 after — so a completion costs
// a counter reset, not a clock read (C's loops read no clock there).
type stallWatch struct {
	idle  int   // empty passes since the last completion
	since int64 // when the idle stretch was first noticed
}

// progress records that a completion arrived.
func (s *stallWatch) progress() { s.idle = 0 }

// stalled counts an empty pass and says whether the loop has been idle
// for stallLimit (give or take the 4096 passes before the first look).
func (s *stallWatch) stalled() bool {
	s.idle++
	if s.idle&4095 != 0 {
		return false
	}
	t := now()
	if s.idle == 4096 {
		s.since = t
		return false
	}
	return t-s.since > int64(stallLimit)
}
