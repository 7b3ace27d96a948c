//go:build linux

package netpoll

import (
	"fmt"
	"net/netip"
)

// ConnID names one source of one Driver: the slot it occupies and that
// slot's generation. Slots are reused, generations are not: once
// [Handler.OnClosed] has reported an id, the driver answers it with
// ErrNoSource, even after its slot holds another source. The zero ConnID
// names no source.
type ConnID uint64

// newConnID is the id of generation gen (never zero) of slot i.
func newConnID(i int, gen uint32) ConnID { return ConnID(gen)<<32 | ConnID(uint32(i)) }

// slot is the index of the id's slot.
func (id ConnID) slot() int { return int(uint32(id)) }

// gen is the id's slot generation.
func (id ConnID) gen() uint32 { return uint32(id >> 32) }

// String is the slot and the generation, as "slot.generation".
func (id ConnID) String() string { return fmt.Sprintf("%d.%d", id.slot(), id.gen()) }

// CloseReason says why a source left the driver.
type CloseReason int

const (
	// Removed: taken out by [Driver.Remove] or [Driver.Close].
	Removed CloseReason = iota + 1
	// PeerClosed: a stream socket read end-of-file.
	PeerClosed
	// Failed: a read or a completion-queue operation failed; the error says
	// which. The other sources are unaffected.
	Failed
)

// String describes the reason in words.
func (r CloseReason) String() string {
	switch r {
	case Removed:
		return "removed"
	case PeerClosed:
		return "peer closed"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("CloseReason(%d)", int(r))
}

// Handler receives a driver's events, on the loop's goroutine.
type Handler interface {
	// OnData delivers one datagram, or the next bytes of a stream. p is the
	// driver's buffer: valid only during the call. from is the sender of a
	// datagram (without IPv6 zone), or the zero AddrPort for a stream.
	OnData(id ConnID, p []byte, from netip.AddrPort)
	// OnClosed is called exactly once per source when it leaves the driver.
	// err is nil unless reason is Failed. By then the driver has closed its
	// descriptor and no longer touches a completion queue: its owner may
	// destroy it. The slot is handed to another source only after OnClosed
	// returns; id itself is never valid again.
	OnClosed(id ConnID, reason CloseReason, err error)
}
