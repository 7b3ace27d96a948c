package main

import (
	"os"
	"runtime"
	"strings"
)

// The measured loops time each message as C perftest does, with the CPU's
// counter (x86's TSC, arm64's virtual counter) rather than the monotonic
// clock: a counter read is a few instructions where clock_gettime through
// the vDSO is about 140 (make profile-insn, ib_read_bw 64 B), once per
// message. The counter's rate is taken from the run itself: stamps are
// converted to nanoseconds against the monotonic clock read at the first
// stamp's origin and again at the conversion.

// counterUsable says the loops read the counter; otherwise stamps are
// now()'s nanoseconds. On amd64 the counter is used only where the kernel
// itself keeps time with it (clocksource tsc), which is its judgement that
// the TSC runs at a constant rate on every CPU.
var counterUsable = haveCounter && counterTrusted()

func counterTrusted() bool {
	if runtime.GOARCH != "amd64" {
		return true
	}
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && strings.TrimSpace(string(b)) == "tsc"
}

// stampOrigin pairs a counter reading with a clock reading.
type stampOrigin struct {
	count uint64
	nanos int64
}

var origin = stampOrigin{count: readCounter(), nanos: now()}

// stamp is a message's timestamp: counter ticks, or nanoseconds.
func stamp() int64 {
	if counterUsable {
		return int64(readCounter())
	}
	return now()
}

// stampsToNanos converts stamps, in place, to now()'s nanoseconds, at
// the rate the counter has run since origin.
func stampsToNanos(ts []int64) {
	if !counterUsable {
		return
	}
	toNanos := origin.scale(readCounter(), now())
	for i, t := range ts {
		if t != 0 { // a completion slot never written stays 0
			ts[i] = toNanos(t)
		}
	}
}

// scale returns the conversion from counter ticks to nanoseconds given a
// second pair of readings, count and nanos, taken after o.
func (o stampOrigin) scale(count uint64, nanos int64) func(int64) int64 {
	ticks := float64(count - o.count)
	if ticks <= 0 {
		return func(int64) int64 { return o.nanos }
	}
	rate := float64(nanos-o.nanos) / ticks
	return func(t int64) int64 {
		return o.nanos + int64(float64(uint64(t)-o.count)*rate)
	}
}

// newStamps allocates room for n stamps and writes every page of it once,
// so that the measured loop, which fills it, takes no page fault: where
// transparent huge pages are on (Debian's default) the first write into
// fresh heap faults in and zeroes a whole 2 MiB page.
func newStamps(n int) []int64 {
	s := make([]int64, n)
	const perPage = 4096 / 8
	for i := 0; i < n; i += perPage {
		s[i] = 0
	}
	return s
}
