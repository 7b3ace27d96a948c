package ucma

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Sizes of the socket addresses the CM takes (sizeof(struct sockaddr_in),
// sizeof(struct sockaddr_in6)).
const (
	sizeofSockaddrIn  = 16
	sizeofSockaddrIn6 = 28
)

// putSockaddr writes a as a struct sockaddr_in (IPv4 and IPv4-mapped
// addresses) or sockaddr_in6 and returns its size. An IPv6 zone becomes the
// scope id of the interface it names.
func putSockaddr(s *sockaddrStorage, a netip.AddrPort) (uint16, error) {
	if !a.IsValid() {
		return 0, fmt.Errorf("invalid address %v: %w", a, unix.EINVAL)
	}
	*s = sockaddrStorage{}
	ip := a.Addr().Unmap()
	binary.BigEndian.PutUint16(s[2:], a.Port())
	if ip.Is4() {
		binary.NativeEndian.PutUint16(s[0:], unix.AF_INET)
		b := ip.As4()
		copy(s[4:8], b[:])
		return sizeofSockaddrIn, nil
	}
	binary.NativeEndian.PutUint16(s[0:], unix.AF_INET6)
	b := ip.As16()
	copy(s[8:24], b[:])
	if z := ip.Zone(); z != "" {
		ifi, err := net.InterfaceByName(z)
		if err != nil {
			return 0, fmt.Errorf("address %v: zone: %w", a, err)
		}
		binary.NativeEndian.PutUint32(s[24:], uint32(ifi.Index))
	}
	return sizeofSockaddrIn6, nil
}

// getSockaddr reads a struct sockaddr_in or sockaddr_in6; any other family
// (none, AF_IB) is the zero AddrPort.
func getSockaddr(s *sockaddrStorage) netip.AddrPort {
	port := binary.BigEndian.Uint16(s[2:])
	switch binary.NativeEndian.Uint16(s[0:]) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(s[4:8])), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(s[8:24])), port)
	}
	return netip.AddrPort{}
}

// afIB is AF_IB, the family of struct sockaddr_ib.
const afIB = 27

// getSockaddrIB reads a struct sockaddr_ib (QUERY GID's answer): the GID at
// offset 8 and the P_Key at 2, both big-endian on the wire.
func getSockaddrIB(s *sockaddrStorage) (uverbs.GID, uint16) {
	if binary.NativeEndian.Uint16(s[0:]) != afIB {
		return uverbs.GID{}, 0
	}
	return uverbs.GID(s[8:24]), binary.BigEndian.Uint16(s[2:])
}
