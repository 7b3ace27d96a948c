//go:build linux

package netpoll

import (
	"fmt"
	"net/netip"
)

// ConnID names a source within one Driver: the index of its slot. Slots are
// reused, so an id is only meaningful until [Handler.OnClosed] reports it.
type ConnID int

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
	// destroy it. id may be handed out again from here on.
	OnClosed(id ConnID, reason CloseReason, err error)
}
