package server

import "sync/atomic"

// SOF is the first-user byte of every frame: the SSI start-of-frame bit,
// as rogue sets it.
const SOF = 0x02

// Frame is one received message, handed downstream without a copy: Data
// aliases the server's receive slab until Release gives the slot back.
//
// Frames are recycled: after Release the *Frame belongs to the server and
// is reused for a later message. Data and Release on a released frame are
// caught (Data panics, Release is a no-op) until then.
type Frame struct {
	pool     *pool
	slot     uint32
	channel  uint8
	position uint32
	data     []byte
	held     atomic.Bool
}

// Channel is the channel the sender put in bits 7..0 of the immediate.
func (f *Frame) Channel() uint8 { return f.channel }

// Position is the sender's ring position, bits 31..8 of the immediate
// (24 bits).
func (f *Frame) Position() uint32 { return f.position }

// FirstUser is the first-user byte, SOF on every frame.
func (f *Frame) FirstUser() uint8 { return SOF }

// LastUser is the last-user byte, 0 on every frame.
func (f *Frame) LastUser() uint8 { return 0 }

// Len is the payload length.
func (f *Frame) Len() int { return len(f.data) }

// Data returns the payload, in place in the receive slab. It stays valid
// until Release, even across the server's Close. Data panics on a
// released frame: the slot may already hold another message.
func (f *Frame) Data() []byte {
	if !f.held.Load() {
		panic("server: Frame.Data after Release")
	}
	return f.data
}

// Release gives the slot back for the next message. It is idempotent and
// safe from any goroutine; after the server's Close it makes no verbs call,
// and the last Release unmaps the slab.
func (f *Frame) Release() {
	if f.held.CompareAndSwap(true, false) {
		f.pool.release(f.slot)
	}
}
