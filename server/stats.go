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
	// ChannelGaps counts, per channel, the frames whose ring position was
	// not the previous one's successor (nor a wrap to 0): each is at least
	// one lost frame, even from a sender whose sequence is unknown.
	ChannelGaps [256]uint64

	Errors    [numStatuses]uint64 // error completions by status (index = cq.Status)
	BadWRID   uint64              // completions naming no posted receive: no slot, or a receive the slot no longer has (dropped)
	BadOpcode uint64              // completions other than a receive with immediate
	BadLength uint64              // receives of zero bytes or more than a slot

	Posted        int // slots in the receive queue
	Held          int // slots out of it: Posted + Held == depth at every instant until Close; after it, the frames not yet released
	Downstream    int // of the held slots, those in Frames not yet released
	PostedLowMark int // fewest slots posted since the first connection

	Parks uint64 // times the loop went to sleep in epoll after its spin budget

	Sessions    uint64 // connections made (CompleteConnection or side channel)
	SessionEnds uint64 // connections that ended (sender gone, flush, takeover)
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
	channelGaps          [256]atomic.Uint64
	errors               [numStatuses]atomic.Uint64
	badWRID, badOpcode   atomic.Uint64
	badLength            atomic.Uint64
	postedLow            atomic.Int64
	parks                atomic.Uint64
	sessions, sessionEnd atomic.Uint64

	// lastPos is each channel's last ring position plus one (0: none yet);
	// only the loop reads and writes it.
	lastPos [256]uint32
}

func bump(c *atomic.Uint64, n uint64) { c.Store(c.Load() + n) }

// frame counts a delivered frame and checks its ring position.
func (c *counters) frame(channel uint8, pos uint32, n int) {
	bump(&c.frames, 1)
	bump(&c.bytes, uint64(n))
	bump(&c.channelFrames[channel], 1)
	if last := c.lastPos[channel]; last != 0 {
		next := last & 0xffffff // last+1, wrapped to 24 bits
		if pos != next && pos != 0 {
			bump(&c.channelGaps[channel], 1)
		}
	}
	c.lastPos[channel] = pos + 1
}

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
	for i := range s.ChannelFrames {
		s.ChannelFrames[i] = c.channelFrames[i].Load()
		s.ChannelGaps[i] = c.channelGaps[i].Load()
	}
	for i := range s.Errors {
		s.Errors[i] = c.errors[i].Load()
	}
	s.BadWRID, s.BadOpcode, s.BadLength = c.badWRID.Load(), c.badOpcode.Load(), c.badLength.Load()
	s.Posted, s.Held = p.postedHeld()
	s.PostedLowMark = int(c.postedLow.Load())
	for i := range p.state {
		if p.state[i].Load() == slotDownstream {
			s.Downstream++
		}
	}
	s.Sessions, s.SessionEnds = c.sessions.Load(), c.sessionEnd.Load()
	s.Parks = c.parks.Load()
	return s
}
