package topology

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

func TestListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if ok, err := Listening(port); err != nil || !ok {
		t.Fatalf("port %d: listening %v, %v; want true", port, ok, err)
	}
	l.Close()
	if ok, err := Listening(port); err != nil || ok {
		t.Fatalf("closed port %d: listening %v, %v; want false", port, ok, err)
	}
}

// cmEntry is one RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY as nldev.c's
// fill_res_cm_id_entry writes it: PS, state and, when the ID has one, the
// source address as a whole struct sockaddr_storage.
func cmEntry(state uint8, src netip.AddrPort, family uint16) *nl.RtAttr {
	e := nl.NewRtAttr(nldevAttrResCMIDEntry, nil)
	e.AddRtAttr(32, nl.Uint32Attr(0x0106)) // RDMA_NLDEV_ATTR_RES_PS: RDMA_PS_TCP
	e.AddRtAttr(nldevAttrResState, []byte{state})
	if src.IsValid() || family != 0 {
		ss := make([]byte, 128)
		a := src.Addr()
		if family == 0 {
			family = unix.AF_INET6
			if a.Is4() {
				family = unix.AF_INET
			}
		}
		binary.NativeEndian.PutUint16(ss, family)
		binary.BigEndian.PutUint16(ss[2:], src.Port())
		switch family {
		case unix.AF_INET:
			b := a.As4()
			copy(ss[4:], b[:])
		case unix.AF_INET6:
			b := a.As16()
			copy(ss[8:], b[:])
		}
		e.AddRtAttr(nldevAttrResSrcAddr, ss)
	}
	return e
}

// cmDumpMsg is one message of a RES_CM_ID_GET dump: the device's handle,
// then the table of entries (flags as the kernel may set them on a nest).
func cmDumpMsg(tableType int, entries ...*nl.RtAttr) []byte {
	var b []byte
	b = append(b, nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_DEV_INDEX, nl.Uint32Attr(3)).Serialize()...)
	b = append(b, nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_DEV_NAME, []byte("rxe0\x00")).Serialize()...)
	table := nl.NewRtAttr(tableType, nil)
	for _, e := range entries {
		table.AddChild(e)
	}
	return append(b, table.Serialize()...)
}

func TestCMListens(t *testing.T) {
	const listen, connect, addrBound = cmStateListen, 5, 7 // RDMA_CM_CONNECT, RDMA_CM_ADDR_BOUND
	ap := netip.MustParseAddrPort
	a1, a2 := netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")
	anyAddr := netip.Addr{}
	for _, tc := range []struct {
		name string
		msgs [][]byte
		port int
		addr netip.Addr
		want bool
	}{
		{"no CM IDs", [][]byte{cmDumpMsg(nldevAttrResCMID)}, 18601, anyAddr, false},
		{"wildcard listener, any address", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(listen, ap("0.0.0.0:18601"), 0))}, 18601, anyAddr, true},
		{"wildcard listener, a given address", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(listen, ap("0.0.0.0:18601"), 0))}, 18601, a2, true},
		{"wildcard listener, another port", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(listen, ap("0.0.0.0:18601"), 0))}, 18602, anyAddr, false},
		{"bound listener, its address", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(listen, ap("10.99.0.1:7174"), 0))}, 7174, a1, true},
		{"bound listener, another address", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(listen, ap("10.99.0.1:7174"), 0))}, 7174, a2, false},
		{"bound, not listening yet", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(addrBound, ap("10.99.0.1:7174"), 0))}, 7174, anyAddr, false},
		{"a connection on the port", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(connect, ap("10.99.0.1:7174"), 0))}, 7174, anyAddr, false},
		{"IPv6 wildcard", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(listen, ap("[::]:7174"), 0))}, 7174, a1, true},
		{"IPv4-mapped IPv6", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(listen, ap("[::ffff:10.99.0.1]:7174"), 0))}, 7174, netip.MustParseAddr("::ffff:10.99.0.1"), true},
		{"no source address", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(listen, netip.AddrPort{}, 0))}, 0, anyAddr, false},
		{"AF_IB source", [][]byte{cmDumpMsg(nldevAttrResCMID, cmEntry(listen, ap("0.0.0.0:7174"), unix.AF_IB))}, 7174, anyAddr, false},
		{"nested flag on the table", [][]byte{cmDumpMsg(unix.NLA_F_NESTED|nldevAttrResCMID, cmEntry(listen, ap("0.0.0.0:7174"), 0))}, 7174, anyAddr, true},
		{"another table", [][]byte{cmDumpMsg(nldevAttrResCMID+8, cmEntry(listen, ap("0.0.0.0:7174"), 0))}, 7174, anyAddr, false},
		{"the listener in a later message", [][]byte{
			cmDumpMsg(nldevAttrResCMID, cmEntry(connect, ap("10.99.0.1:7174"), 0), cmEntry(listen, ap("10.99.0.1:7175"), 0)),
			cmDumpMsg(nldevAttrResCMID, cmEntry(addrBound, ap("10.99.0.1:7176"), 0), cmEntry(listen, ap("0.0.0.0:7174"), 0)),
		}, 7174, a1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cmListens(tc.msgs, tc.port, tc.addr)
			if err != nil || got != tc.want {
				t.Errorf("cmListens(port %d, %v) = %v, %v; want %v", tc.port, tc.addr, got, err, tc.want)
			}
		})
	}
	// A truncated attribute is an error, not a silent "no".
	msg := cmDumpMsg(nldevAttrResCMID, cmEntry(listen, ap("0.0.0.0:7174"), 0))
	if _, err := cmListens([][]byte{msg[:len(msg)-3]}, 7174, anyAddr); err == nil {
		t.Error("truncated dump: no error")
	}
}
