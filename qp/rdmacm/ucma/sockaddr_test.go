package ucma

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

func TestSockaddrRoundTrip(t *testing.T) {
	for _, c := range []struct {
		in   string
		size uint16
	}{
		{"10.99.0.1:7174", sizeofSockaddrIn},
		{"[::ffff:10.99.0.2]:18515", sizeofSockaddrIn}, // IPv4-mapped travels as AF_INET
		{"[fe80::1]:1", sizeofSockaddrIn6},
		{"0.0.0.0:0", sizeofSockaddrIn},
	} {
		a := netip.MustParseAddrPort(c.in)
		var s sockaddrStorage
		n, err := putSockaddr(&s, a)
		if err != nil || n != c.size {
			t.Fatalf("%s: size %d err %v, want %d", c.in, n, err, c.size)
		}
		if binary.BigEndian.Uint16(s[2:]) != a.Port() {
			t.Errorf("%s: port not in network order: % x", c.in, s[:4])
		}
		want := netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
		if got := getSockaddr(&s); got != want {
			t.Errorf("%s: read back %v", c.in, got)
		}
	}
	var s sockaddrStorage
	if _, err := putSockaddr(&s, netip.AddrPort{}); err == nil {
		t.Error("the zero AddrPort was accepted")
	}
	if got := getSockaddr(&sockaddrStorage{}); got.IsValid() {
		t.Errorf("an empty sockaddr read as %v", got)
	}
}

func TestSockaddrIB(t *testing.T) {
	var s sockaddrStorage
	binary.NativeEndian.PutUint16(s[0:], afIB)
	binary.BigEndian.PutUint16(s[2:], 0xffff)
	gid := uverbs.GID{0: 0xfe, 1: 0x80, 15: 7}
	copy(s[8:], gid[:])
	g, pkey := getSockaddrIB(&s)
	if g != gid || pkey != 0xffff {
		t.Errorf("got %v %#x", g, pkey)
	}
}
