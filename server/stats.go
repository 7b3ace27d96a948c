package server

import (
	"sync/atomic"

	"github.com/pureverbs/pureverbs/cq"
)

// numStatuses covers every completion status the kernel defines.
const numStatuses = 22

// Stats is a snapshot of the server's counters.
type Stats struct {
	Frames uint64 // frames delivered downstream
	Bytes  uint64 // their payload bytes

	ChannelFrames [256]uint64 // frames per channel

	// RingMode and RingSize are how positions were tracked (Config.Ring,
	// Config.RingSize).
	RingMode RingMode
	RingSize uint32
	// Ring counts what the ring positions showed, over all rings (one, or
	// one per channel); ChannelRing the same by the channel of the frame
	// that showed it. Each connection's first frame sets its ring's start.
	Ring        RingCounts
	ChannelRing [256]RingCounts

	HandlerPanics uint64 // Handler calls that panicked (recovered)
	StaleReleases uint64 // Releases of a Frame already released (no-ops)

	// The side channel (Serve): exchanges completed (each one a sender
	// connected), failed (garbage, half records, timeouts, a closed
	// connection, an eviction), connections refused before any exchange
	// (not on the allow-list, or MaxExchanges running and none of them
	// evictable), and exchanges evicted to make room for a new client
	// (their client had not sent its whole record).
	Exchanges, ExchangeFailures, Refused, Evicted uint64
	// RDMA CM (ServeCM): connections accepted (each one a sender
	// connected), accepts that failed (a timeout, an eviction, a failed
	// QP or accept), requests rejected before any accept (not on the
	// allow-list, or MaxAccepts running and every one established), and
	// accepts evicted to make room for a new request (not yet
	// ESTABLISHED).
	CMConnects, CMFailures, CMRefused, CMEvicted uint64

	Errors    [numStatuses]uint64 // error completions by status (index = cq.Status)
	BadWRID   uint64              // completions naming no posted receive: no slot, or a receive the slot no longer has (dropped)
	BadOpcode uint64              // completions other than a receive with immediate
	BadLength uint64              // receives of zero bytes or more than a slot

	Posted        int // slots in the receive queue
	Held          int // slots out of it: Posted + Held == depth at every instant until Close; after it, the frames not yet released
	Downstream    int // of the held slots, those in Frames not yet released
	PostedLowMark int // fewest slots posted since the first connection

	Parks uint64 // times the loop went to sleep (a poll on the CQ channel) after its spin budget

	Sessions    uint64 // connections made (CompleteConnection or side channel)
	SessionEnds uint64 // connections that ended (sender gone, flush, takeover, idle)
}

// RingCounts is what a sender's ring positions (the immediate's bits
// 31..8) showed. A step back (or, with the ring size known, a jump ahead
// by half the ring or more) is a duplicate, unless the next frame follows
// on from it: then the sender really went there, and it counts as a gap
// (and a wrap if it crossed 0) — so Duplicates can drop by one between two
// snapshots. With the ring size unknown a step back to
// 0 is a wrap; one to p > 0 followed by p+1 is a wrap that lost position 0
// and counts p missing — the positions lost before the ring's unknown end
// are not counted — and one followed by nothing (the stream's last frame)
// or by another loss stays a duplicate. A replay of two or more
// consecutive positions reads as the sender going back there.
type RingCounts struct {
	Gaps       uint64 // jumps ahead: at least one frame lost at each
	Missing    uint64 // positions the jumps skipped: the frames lost, for a sender that numbers every frame
	Duplicates uint64 // positions at or behind the last one: a repeat or a replay
	Wraps      uint64 // times the position ran past the ring size back to 0
}

func (r *RingCounts) add(o RingCounts) {
	r.Gaps += o.Gaps
	r.Missing += o.Missing
	r.Duplicates += o.Duplicates
	r.Wraps += o.Wraps
}

// ErrorCount returns the number of error completions with status st.
func (s *Stats) ErrorCount(st cq.Status) uint64 {
	if int(st) < len(s.Errors) {
		return s.Errors[st]
	}
	return 0
}

// TotalErrors is the number of error completions of any status.
func (s *Stats) TotalErrors() uint64 {
	var n uint64
	for _, e := range s.Errors {
		n += e
	}
	return n
}

// counters are the live counters. The loop is their only writer (except
// the session counts), so an increment is a load and a store.
type counters struct {
	frames, bytes        atomic.Uint64
	channelFrames        [256]atomic.Uint64
	channelRing          [256]ringCounters
	errors               [numStatuses]atomic.Uint64
	badWRID, badOpcode   atomic.Uint64
	badLength            atomic.Uint64
	postedLow            atomic.Int64
	parks                atomic.Uint64
	sessions, sessionEnd atomic.Uint64
	handlerPanics        atomic.Uint64 // written by the loop only, but with Add: rare
	exchanges, exFailed  atomic.Uint64
	cmConnects, cmFailed atomic.Uint64
	cmRefused, cmEvicted atomic.Uint64
	refused, evicted     atomic.Uint64

	ringMode RingMode
	ringSize uint32
	// lastPos is each ring's last position plus one (0: none yet); ring 0
	// is the shared one. Only the loop reads and writes it.
	lastPos [256]uint32
	// suspect is, per ring, the position after the last frame counted as
	// a duplicate (0: none), and suspectCh its channel: if the next frame
	// has that position, the sender really went there.
	suspect   [256]uint32
	suspectCh [256]uint8
}

type ringCounters struct{ gaps, missing, duplicates, wraps atomic.Uint64 }

func bump(c *atomic.Uint64, n uint64) { c.Store(c.Load() + n) }

// frame counts a delivered frame and checks its ring position.
func (c *counters) frame(channel uint8, pos uint32, n int) {
	bump(&c.frames, 1)
	bump(&c.bytes, uint64(n))
	bump(&c.channelFrames[channel], 1)
	ring := 0
	switch c.ringMode {
	case RingOff:
		return
	case RingPerChannel:
		ring = int(channel)
	}
	last := c.lastPos[ring]
	c.lastPos[ring] = pos + 1
	if last == 0 {
		return // the connection's first frame on this ring
	}
	suspect := c.suspect[ring]
	c.suspect[ring] = 0
	rc := &c.channelRing[channel]
	mod := uint32(1 << 24)
	if c.ringSize != 0 {
		mod = c.ringSize
	}
	next := last % mod // the successor of last-1
	switch {
	case pos == next:
		if pos < last {
			bump(&rc.wraps, 1)
		}
	case suspect != 0 && pos == suspect%mod:
		// The frame before was taken for a duplicate, but the sender goes
		// on from it: it was there. Count the step to it as a jump ahead.
		p := suspect - 1
		sr := &c.channelRing[c.suspectCh[ring]]
		bump(&sr.duplicates, ^uint64(0))
		bump(&sr.gaps, 1)
		switch {
		case p >= last:
			bump(&sr.missing, uint64(p-next))
		case c.ringSize != 0:
			bump(&sr.missing, uint64((p+mod-next)%mod))
			bump(&sr.wraps, 1)
		default:
			// A wrap of unknown size: 0..p-1 are lost, and however many
			// came after last-1 before the ring's end.
			bump(&sr.missing, uint64(p))
			bump(&sr.wraps, 1)
		}
		if pos < suspect {
			bump(&rc.wraps, 1)
		}
	case c.ringSize == 0 && pos == 0:
		bump(&rc.wraps, 1) // a sender whose ring size is unknown wrapped
	default:
		if pos >= mod {
			bump(&rc.gaps, 1) // outside the ring: how many were lost is unknown
			return
		}
		skipped := (pos + mod - next) % mod
		if skipped >= mod/2 {
			// At or behind the last position: keep the last one, unless
			// the next frame follows this one.
			bump(&rc.duplicates, 1)
			c.lastPos[ring] = last
			c.suspect[ring], c.suspectCh[ring] = pos+1, channel
			return
		}
		bump(&rc.gaps, 1)
		bump(&rc.missing, uint64(skipped))
		if pos < last {
			bump(&rc.wraps, 1)
		}
	}
}

// newConnection forgets the ring positions: a new sender starts where it
// likes.
func (c *counters) newConnection() { c.lastPos, c.suspect = [256]uint32{}, [256]uint32{} }

func (c *counters) status(st cq.Status) {
	if int(st) < numStatuses {
		bump(&c.errors[st], 1)
	} else {
		bump(&c.errors[cq.GeneralErr], 1)
	}
}

// lowWater records posted as the low-water mark if it is one.
func (c *counters) lowWater(posted int) {
	if int64(posted) < c.postedLow.Load() {
		c.postedLow.Store(int64(posted))
	}
}

func (c *counters) snapshot(p *pool) Stats {
	var s Stats
	s.Frames, s.Bytes = c.frames.Load(), c.bytes.Load()
	s.RingMode, s.RingSize = c.ringMode, c.ringSize
	for i := range s.ChannelFrames {
		s.ChannelFrames[i] = c.channelFrames[i].Load()
		r := &c.channelRing[i]
		s.ChannelRing[i] = RingCounts{Gaps: r.gaps.Load(), Missing: r.missing.Load(), Duplicates: r.duplicates.Load(), Wraps: r.wraps.Load()}
		s.Ring.add(s.ChannelRing[i])
	}
	s.HandlerPanics, s.StaleReleases = c.handlerPanics.Load(), p.stale.Load()
	s.Exchanges, s.ExchangeFailures, s.Refused, s.Evicted = c.exchanges.Load(), c.exFailed.Load(), c.refused.Load(), c.evicted.Load()
	s.CMConnects, s.CMFailures, s.CMRefused, s.CMEvicted = c.cmConnects.Load(), c.cmFailed.Load(), c.cmRefused.Load(), c.cmEvicted.Load()
	for i := range s.Errors {
		s.Errors[i] = c.errors[i].Load()
	}
	s.BadWRID, s.BadOpcode, s.BadLength = c.badWRID.Load(), c.badOpcode.Load(), c.badLength.Load()
	// Sessions before slots: a connection's end unposts its slots and
	// then counts the end, so a snapshot that shows the end shows them
	// unposted too (read the other way round, TestServerSenderKilled saw
	// SessionEnds 1 with 240 slots still posted, on 6.12).
	s.Sessions, s.SessionEnds = c.sessions.Load(), c.sessionEnd.Load()
	s.Posted, s.Held = p.postedHeld()
	s.PostedLowMark = int(c.postedLow.Load())
	for i := range p.slots {
		if p.slots[i].state() == slotDownstream {
			s.Downstream++
		}
	}
	s.Parks = c.parks.Load()
	return s
}
