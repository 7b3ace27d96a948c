package qp

import (
	"encoding/binary"
	"net/netip"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// GRHLen is the size of the area in front of every datagram a UD QP
// receives: a receive buffer must have GRHLen bytes more than the largest
// payload, and the payload starts GRHLen bytes into it.
const GRHLen = 40

// GRH is the network header rdma_rxe writes into the first GRHLen bytes of
// a UD receive buffer. For RoCE v2 over IPv4 that area holds 20 zero bytes
// and then the datagram's IPv4 header; over IPv6 it holds the IPv6 header.
// The GIDs are the addresses as RoCE GIDs (IPv4-mapped for IPv4).
type GRH struct {
	// Version is the IP version of the datagram: 4 or 6.
	Version int
	// SGID and DGID are the source and destination GIDs.
	SGID, DGID uverbs.GID
	// TrafficClass is the IPv6 traffic class or the IPv4 type of service.
	TrafficClass uint8
	// FlowLabel is the IPv6 flow label (0 for IPv4).
	FlowLabel uint32
	// HopLimit is the IPv6 hop limit or the IPv4 TTL left on arrival.
	HopLimit uint8
}

// Src is the source IP address (an IPv4 address for IPv4-mapped GIDs).
func (h *GRH) Src() netip.Addr { return h.SGID.Addr().Unmap() }

// Dst is the destination IP address (an IPv4 multicast group for a datagram
// sent to one).
func (h *GRH) Dst() netip.Addr { return h.DGID.Addr().Unmap() }

// Errors of ParseGRH and ParseDatagram (EINVAL).
var (
	// ErrNoGRH: the completion does not say a GRH precedes the payload
	// (not a UD receive), or the buffer is shorter than GRHLen.
	ErrNoGRH error = &grhError{"qp: no GRH in front of the datagram"}
	// ErrBadGRH: the GRH area holds neither an IPv4 nor an IPv6 header.
	ErrBadGRH error = &grhError{"qp: GRH area holds no IPv4 or IPv6 header"}
)

type grhError struct{ msg string }

func (e *grhError) Error() string { return e.msg }
func (e *grhError) Unwrap() error { return unix.EINVAL }

// ParseGRH decodes the GRHLen bytes in front of a received datagram. It
// allocates nothing.
func ParseGRH(b []byte) (GRH, error) {
	if len(b) < GRHLen {
		return GRH{}, ErrNoGRH
	}
	if b[0]>>4 == 6 {
		var h GRH
		h.Version = 6
		vtf := binary.BigEndian.Uint32(b)
		h.TrafficClass = uint8(vtf >> 20)
		h.FlowLabel = vtf & 0xfffff
		h.HopLimit = b[7]
		copy(h.SGID[:], b[8:24])
		copy(h.DGID[:], b[24:40])
		return h, nil
	}
	for _, c := range b[:20] {
		if c != 0 {
			return GRH{}, ErrBadGRH
		}
	}
	ip := b[20:40]
	if ip[0] != 0x45 { // version 4, 20-byte header (rxe sends no options)
		return GRH{}, ErrBadGRH
	}
	h := GRH{Version: 4, TrafficClass: ip[1], HopLimit: ip[8]}
	h.SGID = uverbs.GID(netip.AddrFrom4([4]byte(ip[12:16])).As16())
	h.DGID = uverbs.GID(netip.AddrFrom4([4]byte(ip[16:20])).As16())
	return h, nil
}

// Datagram is a received UD message: where it came from and its payload.
type Datagram struct {
	GRH GRH
	// SrcQP is the sending QP's number (from the completion).
	SrcQP uint32
	// Payload is the message, within the receive buffer, after the GRH.
	Payload []byte
}

// ParseDatagram decodes the receive buffer buf of the UD receive that wc
// completed: the GRH in front, the sender's QP number and the payload
// (wc.ByteLen counts the GRH). It allocates nothing.
func ParseDatagram(wc *cq.WC, buf []byte) (Datagram, error) {
	if wc.Flags&cq.GRH == 0 || wc.ByteLen < GRHLen || int(wc.ByteLen) > len(buf) {
		return Datagram{}, ErrNoGRH
	}
	h, err := ParseGRH(buf)
	if err != nil {
		return Datagram{}, err
	}
	return Datagram{GRH: h, SrcQP: wc.SrcQP, Payload: buf[GRHLen:wc.ByteLen]}, nil
}
