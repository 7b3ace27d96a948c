// Package eventlook decides when the tools' completion-event waits look
// for an event already queued before they sleep.
//
// C's wait is one blocking read(2) of the completion channel, which
// returns at once when the event is queued: on Linux 6.1 a send's
// completion usually is by the time its doorbell write returns (rxe runs
// the requester, and through the loopback softirq the peer's answer,
// inside that write). The Go tools sleep in an epoll wait first, so that
// Close can wake them, and then read: two system calls where C makes one.
// A look (a non-blocking read) taken first makes a queued event one read
// again; where events come while the loop sleeps the look is a read more,
// so looks that find nothing grow rarer.
package eventlook

import "github.com/pureverbs/pureverbs/cq"

// maxSkip bounds the waits that go without a look after a miss.
const maxSkip = 64

// Look is when one kind of wait (a tool keeps one Look per kind: the
// waits for a send's completion find events queued, those for the peer's
// message do not) next looks. The zero Look looks at the first wait.
type Look struct {
	// skip is how many waits go without a look after the last one found
	// nothing, and left how many of them remain.
	skip, left int
}

// Queued returns the event queued on ch, if this wait looks and finds one;
// nil means sleep, then read. An error of the look is left to that read,
// which meets it again and reports it.
func (l *Look) Queued(ch *cq.Channel) *cq.CQ {
	if !l.due() {
		return nil
	}
	c, _ := ch.TryGetEvent()
	l.saw(c != nil)
	return c
}

// due says whether this wait looks.
func (l *Look) due() bool {
	if l.left > 0 {
		l.left--
		return false
	}
	return true
}

// saw records whether a look found an event: a miss doubles the waits that
// skip the look after it, up to maxSkip; a hit halves them and lets the
// next wait look. A look is worth its read when it hits more often than it
// misses (a hit saves the poll, a miss costs a read): at even odds, as on
// Linux 6.12 where rxe completes a send from a workqueue, hits and misses
// cancel out and the looks stay rare, where a hit that made every wait look
// again would miss once in three waits.
func (l *Look) saw(hit bool) {
	if hit {
		l.skip /= 2
		return
	}
	l.skip = min(max(2*l.skip, 1), maxSkip)
	l.left = l.skip
}
