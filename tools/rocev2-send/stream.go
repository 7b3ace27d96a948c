package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/server/framecheck"
	"github.com/pureverbs/pureverbs/uverbs"
)

// streamer is the frame stream, which outlives a connection: with
// -reconnect a new connection goes on with the next frame, sequence
// number and ring position, as an FPGA's counters would.
type streamer struct {
	o          *options
	start      time.Time
	deadline   time.Time // zero: no -t
	head, tail uint64    // next frame to post, oldest not known complete
	pos        []uint32  // the next ring position of each ring
	frames     uint64    // frames seen acknowledged
	bytes      uint64
	elapsed    time.Duration
	// unacked are the frames of failed connections that were posted but
	// not seen acknowledged: each may or may not have arrived.
	unacked []frameRange
}

// frameRange is frames first..last.
type frameRange struct{ first, last uint64 }

func (r frameRange) String() string {
	if r.first == r.last {
		return fmt.Sprint(r.first)
	}
	return fmt.Sprintf("%d..%d", r.first, r.last)
}

// completionError is a send that completed with an error: the QP is in
// the error state and the connection is over.
type completionError struct {
	wc     cq.WC
	frames uint64 // acknowledged before it
}

func (e *completionError) Error() string {
	return fmt.Sprintf("send completion error: %v (status %d, vendor error %#x) after %d frames",
		e.wc.Status, uint32(e.wc.Status), e.wc.VendorErr, e.frames)
}

func newStreamer(o *options) *streamer {
	z := &streamer{o: o, start: time.Now(), pos: make([]uint32, o.channels)}
	if o.duration > 0 {
		z.deadline = z.start.Add(o.duration)
	}
	return z
}

// more reports whether frames remain to be posted.
func (z *streamer) more() bool {
	if z.o.count != 0 && z.head >= z.o.count {
		return false
	}
	return z.deadline.IsZero() || z.head%64 != 0 || time.Now().Before(z.deadline)
}

// fill writes frame head's payload: its sequence number and checksum
// (server/framecheck), with the test faults of -drop and -corrupt applied.
func (z *streamer) fill(b []byte, head uint64) {
	seq := head
	if z.o.dropSeq >= 0 && head >= uint64(z.o.dropSeq) {
		seq++ // the frames from -drop on carry the next number
	}
	framecheck.Fill(b, seq)
	if z.o.corruptSeq >= 0 && seq == uint64(z.o.corruptSeq) && len(b) > 0 {
		b[len(b)-1] ^= 0xff
	}
}

// abandon gives up the frames in flight on a failed connection (there is
// at least one: the failed completion's) and returns them; the next
// connection starts with the next frame.
func (z *streamer) abandon() frameRange {
	r := frameRange{z.tail, z.head - 1}
	z.unacked = append(z.unacked, r)
	z.tail = z.head
	return r
}

// unackedSummary lists the abandoned frames, and how many.
func (z *streamer) unackedSummary() string {
	var b strings.Builder
	n := uint64(0)
	for i, r := range z.unacked {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.String())
		n += r.last - r.first + 1
	}
	return fmt.Sprintf("%s (%d frames)", b.String(), n)
}

// stream posts frames on s, keeping up to depth in flight, one doorbell
// per batch, and reaps completions; it stops at the end of the stream or
// at the first failed completion (a *completionError). Slots are used in
// ring order, so that a completion for frame seq (with -signal N only
// every Nth is signalled, and the last) accounts for every frame before
// it.
func (z *streamer) stream(s *sender) error {
	o := z.o
	defer func() { z.elapsed = time.Since(z.start) }()
	slot := max(o.maxSize, 1)
	mem := s.buf.Bytes()
	depth := uint64(o.depth)
	wrs := make([]qp.SendWR, o.depth)
	sges := make([]uverbs.SGE, o.depth)
	sizes := make([]int, o.depth)
	wc := make([]cq.WC, o.depth)
	span := uint64(o.maxSize - o.minSize + 1)
	signal := uint64(o.signal)
	// Without -fill each slot of this connection's buffer is written once.
	fillUntil := z.head + depth
	for {
		// Post as many as there is room for (and the rate allows).
		k := 0
		for z.head-z.tail < depth && z.more() {
			if o.rate > 0 {
				due := z.start.Add(time.Duration(float64(z.head) / o.rate * float64(time.Second)))
				if d := time.Until(due); d > 0 {
					if k > 0 || z.head != z.tail {
						break
					}
					time.Sleep(d)
				}
			}
			i := z.head % depth
			n := o.minSize
			if span > 1 {
				n += int((z.head * 0x9e3779b97f4a7c15 >> 40) % span)
			}
			if o.fill || z.head < fillUntil {
				z.fill(mem[int(i)*slot:int(i)*slot+n], z.head)
			}
			ch := int(z.head % uint64(o.channels))
			ring := 0
			if o.perChan {
				ring = ch
			}
			sge, err := s.mr.SGE(int(i)*slot, n)
			if err != nil {
				return err
			}
			sges[i] = sge
			wrs[k] = qp.SendWR{ID: z.head, Opcode: o.op, Imm: z.pos[ring]<<8 | uint32(o.chanBase+ch),
				SGEs: sges[i : i+1], RemoteAddr: o.raddr, RKey: o.rkey}
			if n == 0 {
				wrs[k].SGEs = nil
			}
			sizes[i] = n
			z.pos[ring] = (z.pos[ring] + 1) % o.wrap
			z.head++
			// Signal every Nth, the one that fills the queue, and the last.
			if z.head%signal == 0 || z.head-z.tail == depth || !z.more() {
				wrs[k].Flags = qp.Signaled
			}
			k++
		}
		if k > 0 {
			if err := s.qp.PostSend(wrs[:k]); err != nil {
				return fmt.Errorf("post send: %w", err)
			}
		}
		if z.head == z.tail && !z.more() {
			return nil
		}
		n, err := s.cq.Poll(wc)
		if err != nil {
			return fmt.Errorf("poll CQ: %w", err)
		}
		for _, c := range wc[:n] {
			if c.Status != cq.Success {
				return &completionError{wc: c, frames: z.frames}
			}
			for ; z.tail <= c.WRID; z.tail++ {
				z.frames++
				z.bytes += uint64(sizes[z.tail%depth])
			}
		}
	}
}
