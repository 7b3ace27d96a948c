//go:build linux

package netpoll

import (
	"sync/atomic"
	"time"
)

// Stats counts what a driver did since it was created.
type Stats struct {
	// Passes is the number of loop passes.
	Passes uint64
	// EpollWaits counts epoll_wait and epoll_pwait2 calls.
	EpollWaits uint64
	// Reads counts receive syscalls; EmptyReads those that found nothing.
	Reads, EmptyReads uint64
	// Completions is the sum of what CompletionQueue.Drain returned.
	Completions uint64
	// Closes counts sources that left, for any reason.
	Closes uint64
	// Parks counts waits that could sleep (Park's block, EpollBusy's timed
	// wait), as they begin; Parked is the time spent in those that ended.
	Parks  uint64
	Parked time.Duration
}

// counters is Stats as the loop updates it: atomics, so Stats may be read
// from any goroutine while the loop runs.
type counters struct {
	passes, epollWaits, reads, emptyReads atomic.Uint64
	completions, closes, parks, parkedNS  atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Passes:      c.passes.Load(),
		EpollWaits:  c.epollWaits.Load(),
		Reads:       c.reads.Load(),
		EmptyReads:  c.emptyReads.Load(),
		Completions: c.completions.Load(),
		Closes:      c.closes.Load(),
		Parks:       c.parks.Load(),
		Parked:      time.Duration(c.parkedNS.Load()),
	}
}
