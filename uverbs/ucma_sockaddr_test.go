package uverbs

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"
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
	gid := GID{0: 0xfe, 1: 0x80, 15: 7}
	copy(s[8:], gid[:])
	g, pkey := getSockaddrIB(&s)
	if g != gid || pkey != 0xffff {
		t.Errorf("got %v %#x", g, pkey)
	}
}

func TestCMEventDecoding(t *testing.T) {
	var r ucmaEventResp
	r.UID, r.ID, r.Event, r.Status = 7, 3, uint32(CMEventRejected), 8
	cp := ucmaConnParam{QPNum: 0x11, PrivateDataLen: 3, ResponderResources: 1, InitiatorDepth: 2, RetryCount: 6, RNRRetryCount: 7}
	copy(cp.PrivateData[:], "abc")
	*(*ucmaConnParam)(ptrOf(&r.Param)) = cp
	ev := cmEventFrom(&r)
	p := ev.ConnParam()
	if ev.Type != CMEventRejected || ev.Status != 8 || ev.UID != 7 || ev.ID != 3 || string(p.PrivateData) != "abc" || p.QPNum != 0x11 || p.InitiatorDepth != 2 || p.RNRRetryCount != 7 {
		t.Errorf("decoded %+v %+v", ev, p)
	}
	if ev.Type.String() != "REJECTED" || CMEventTimewaitExit.String() != "TIMEWAIT_EXIT" {
		t.Errorf("names %v %v", ev.Type, CMEventTimewaitExit)
	}
	u := ucmaUDParam{QPNum: 0x22, QKey: 0x01234567, PrivateDataLen: 1}
	u.AHAttr.IsGlobal, u.AHAttr.HopLimit = 1, 64
	*(*ucmaUDParam)(ptrOf(&r.Param)) = u
	ev = cmEventFrom(&r)
	up := ev.UDParam()
	if up.QPNum != 0x22 || up.QKey != 0x01234567 || !up.AH.IsGlobal || up.AH.GRH.HopLimit != 64 || len(up.PrivateData) != 1 {
		t.Errorf("UD decoded %+v", up)
	}
	ev.Status = -110
	if ev.Errno() != 110 {
		t.Errorf("Errno %v", ev.Errno())
	}
}

func ptrOf(p *[304]uint8) unsafe.Pointer { return unsafe.Pointer(p) }
