package main

import "time"

// epoch is the origin of now's timestamps.
var epoch = time.Now()

// now is the monotonic clock in nanoseconds, perftest's get_cycles: it
// allocates nothing.
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
