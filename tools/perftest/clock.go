package main

import (
	"sync/atomic"
	"time"
)

// epoch is the origin of now's timestamps.
var epoch = time.Now()

// now is the monotonic clock in nanoseconds, perftest's get_cycles: it
// allocates nothing.
func now() int64 { return int64(time.Since(epoch)) }

// durationState is perftest's DurationStates: a timed run warms up for
// the margin, samples for duration − 2·margin, cools down for the margin,
// and ends.
type durationState int32

const (
	stateStart durationState = iota
	stateSample
	stateStopSample
	stateEnd
)

// durationClock drives a timed run's states from timers (perftest's
// SIGALRM) and records when sampling started and stopped.
type durationClock struct {
	state         atomic.Int32
	sampleStart   atomic.Int64
	sampleStop    atomic.Int64
	margin, whole time.Duration
	timer         *time.Timer
}

func newDurationClock(o *options) *durationClock {
	return &durationClock{margin: time.Duration(o.margin) * time.Second, whole: time.Duration(o.duration) * time.Second}
}

// start begins the warm-up (catch_alarm's first step when the margin is 0).
func (c *durationClock) start() {
	c.state.Store(int32(stateStart))
	if c.margin > 0 {
		c.timer = time.AfterFunc(c.margin, c.advance)
	} else {
		c.advance()
	}
}

// advance is catch_alarm: the next state, and the timer to the one after.
func (c *durationClock) advance() {
	switch durationState(c.state.Load()) {
	case stateStart:
		c.sampleStart.Store(now())
		c.state.Store(int32(stateSample))
		c.timer = time.AfterFunc(c.whole-2*c.margin, c.advance)
	case stateSample:
		c.sampleStop.Store(now())
		c.state.Store(int32(stateStopSample))
		if c.margin > 0 {
			c.timer = time.AfterFunc(c.margin, c.advance)
		} else {
			c.advance()
		}
	case stateStopSample:
		c.state.Store(int32(stateEnd))
	}
}

func (c *durationClock) current() durationState { return durationState(c.state.Load()) }

// stop ends the run at once (an error or interrupt).
func (c *durationClock) stop() {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.state.Store(int32(stateEnd))
}
