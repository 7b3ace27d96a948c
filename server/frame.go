package server

// SOF is the first-user byte of every frame: the SSI start-of-frame bit,
// as rogue sets it.
const SOF = 0x02

// Frame is one received message, handed downstream without a copy: Data
// aliases the server's receive slab until Release gives the slot back.
//
// A Frame is a small value naming one delivery of one slot (its
// generation): copies of it name the same delivery, and once any of them
// is released every copy is stale. A stale Frame never touches the slot's
// later messages: Release on it does nothing (Stats.StaleReleases counts
// it) and Data panics. The zero Frame is stale.
type Frame struct {
	pool     *pool
	slot     uint32
	channel  uint8
	position uint32
	gen      uint64 // the delivery this Frame names, see slotWord
	data     []byte
}

// Channel is the channel the sender put in bits 7..0 of the immediate.
func (f Frame) Channel() uint8 { return f.channel }

// Position is the sender's ring position, bits 31..8 of the immediate
// (24 bits).
func (f Frame) Position() uint32 { return f.position }

// FirstUser is the first-user byte, SOF on every frame.
func (f Frame) FirstUser() uint8 { return SOF }

// LastUser is the last-user byte, 0 on every frame.
func (f Frame) LastUser() uint8 { return 0 }

// Len is the payload length.
func (f Frame) Len() int { return len(f.data) }

// Data returns the payload, in place in the receive slab. It stays valid
// until Release, even across the server's Close. Data panics on a stale
// frame: the slot may already hold another message.
func (f Frame) Data() []byte {
	if !f.Held() {
		panic("server: Frame.Data after Release (a stale Frame)")
	}
	return f.data
}

// Held reports whether the frame is still held: not released, by this
// copy or any other.
func (f Frame) Held() bool {
	return f.pool != nil && f.pool.slots[f.slot].is(f.gen, slotDownstream)
}

// Release gives the slot back for the next message. It is safe from any
// goroutine; on a stale frame (released before, through any copy) it does
// nothing. After the server's Close it makes no verbs call, and the last
// Release unmaps the slab.
func (f Frame) Release() {
	if f.pool != nil {
		f.pool.release(f.slot, f.gen)
	}
}
