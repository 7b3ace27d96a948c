// Package framecheck is the payload format rocev2-send writes and
// rocev2-server checks: a sequence number and a checksum in every frame, so
// that the receiver can count lost and corrupt frames. A sender of one's
// own can use it to test a server.Server the same way.
//
// A payload of n ≥ 12 bytes is: the sender's sequence number (uint64,
// little endian), a CRC-32 (IEEE) of every other byte, then filler derived
// from the sequence number. A shorter payload holds the low n bytes of the
// sequence number (with filler past 8 bytes) and no checksum; the receiver
// completes the number from the one it expects next (RC delivers in order).
package framecheck

import (
	"encoding/binary"
	"hash/crc32"
)

// HeaderLen is the size from which a payload carries its checksum.
const HeaderLen = 12

// Fill writes the payload of frame seq into b (its length is the size).
func Fill(b []byte, seq uint64) {
	n := len(b)
	if n >= HeaderLen {
		binary.LittleEndian.PutUint64(b, seq)
		filler(b[HeaderLen:], seq)
		binary.LittleEndian.PutUint32(b[8:], checksum(b))
		return
	}
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], seq)
	copy(b, h[:])
	if n > 8 {
		filler(b[8:], seq)
	}
}

// filler is a cheap pattern that differs between frames.
func filler(b []byte, seq uint64) {
	x := byte(seq*0x9e + 1)
	for i := range b {
		b[i] = x + byte(i)
	}
}

// checksum is the CRC of a full-size payload without its CRC field.
func checksum(b []byte) uint32 {
	c := crc32.ChecksumIEEE(b[:8])
	return crc32.Update(c, crc32.IEEETable, b[HeaderLen:])
}

// MaxLostRanges is how many ranges of lost frames a Checker names.
const MaxLostRanges = 16

// Range is the sequence numbers First..Last.
type Range struct{ First, Last uint64 }

// Checker counts lost, duplicate and corrupt frames of one in-order
// stream, and names the first MaxLostRanges runs of lost ones. It
// allocates nothing.
type Checker struct {
	next      uint64 // sequence number expected next
	Frames    uint64
	Lost      uint64 // sequence numbers skipped
	Corrupt   uint64 // checksum or filler mismatches
	Duplicate uint64 // sequence numbers seen before (or going backwards)
	// LostRanges[:NLostRanges] are the first runs of lost sequence
	// numbers, in order; Lost counts every one, these and later ones.
	LostRanges  [MaxLostRanges]Range
	NLostRanges int
}

// lose accounts for the sequence numbers first..last as lost.
func (c *Checker) lose(first, last uint64) {
	c.Lost += last - first + 1
	if c.NLostRanges < MaxLostRanges {
		c.LostRanges[c.NLostRanges] = Range{first, last}
		c.NLostRanges++
	}
}

// Check accounts for one payload.
func (c *Checker) Check(b []byte) {
	c.Frames++
	n := len(b)
	var seq uint64
	switch {
	case n >= HeaderLen:
		seq = binary.LittleEndian.Uint64(b)
		if binary.LittleEndian.Uint32(b[8:]) != checksum(b) {
			c.Corrupt++
			c.next++ // the sequence number itself may be what is broken
			return
		}
	default:
		k := min(n, 8)
		var h [8]byte
		copy(h[:], b[:k])
		low := binary.LittleEndian.Uint64(h[:])
		mask := uint64(1)<<(8*k) - 1
		if k == 8 {
			mask = ^uint64(0)
		}
		// The smallest sequence number ≥ next with these low bytes.
		seq = c.next&^mask | low
		if seq < c.next {
			seq += mask + 1
		}
		if n > 8 {
			var want [3]byte
			filler(want[:n-8], seq)
			for i := 8; i < n; i++ {
				if b[i] != want[i-8] {
					c.Corrupt++
					c.next++
					return
				}
			}
		}
	}
	switch {
	case seq < c.next:
		c.Duplicate++
		return
	case seq > c.next:
		c.lose(c.next, seq-1)
	}
	c.next = seq + 1
}

// Expect accounts for frames that never arrived at the end of a stream of
// total frames.
func (c *Checker) Expect(total uint64) {
	if total > c.next {
		c.lose(c.next, total-1)
		c.next = total
	}
}
