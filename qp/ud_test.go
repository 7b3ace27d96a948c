package qp

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/uverbs"
	"golang.org/x/sys/unix"
)

// grh4 is what rxe writes in front of a datagram that came over IPv4: 20
// zero bytes, then the IPv4 header (10.99.0.1 → 10.99.0.2, TTL 1, DSCP/ECN
// 0x08, UDP).
var grh4 = []byte{
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0x45, 0x08, 0x04, 0x3c, 0x12, 0x34, 0x40, 0x00, 0x01, 0x11, 0xab, 0xcd,
	10, 99, 0, 1, 10, 99, 0, 2,
}

// grh6 is an IPv6 header: traffic class 0x5a, flow label 0x12345, hop limit
// 64, fe80::1 → fe80::2.
var grh6 = []byte{
	0x65, 0xa1, 0x23, 0x45, 0x04, 0x10, 0x11, 0x40,
	0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
	0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
}

func TestParseGRH(t *testing.T) {
	h, err := ParseGRH(grh4)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 4 || h.Src() != netip.MustParseAddr("10.99.0.1") || h.Dst() != netip.MustParseAddr("10.99.0.2") ||
		h.HopLimit != 1 || h.TrafficClass != 0x08 || h.SGID != uverbs.GID(netip.MustParseAddr("::ffff:10.99.0.1").As16()) {
		t.Errorf("IPv4 GRH = %+v", h)
	}
	h, err = ParseGRH(grh6)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 6 || h.Src() != netip.MustParseAddr("fe80::1") || h.Dst() != netip.MustParseAddr("fe80::2") ||
		h.HopLimit != 64 || h.TrafficClass != 0x5a || h.FlowLabel != 0x12345 {
		t.Errorf("IPv6 GRH = %+v", h)
	}
	bad := append([]byte(nil), grh4...)
	bad[3] = 1
	if _, err := ParseGRH(bad); !errors.Is(err, ErrBadGRH) {
		t.Errorf("non-zero pad: %v", err)
	}
	if _, err := ParseGRH(grh4[:39]); !errors.Is(err, ErrNoGRH) {
		t.Errorf("short: %v", err)
	}
}

func TestParseDatagram(t *testing.T) {
	buf := append(append([]byte(nil), grh4...), "hello, world"...)
	wc := cq.WC{Flags: cq.GRH, ByteLen: 45, SrcQP: 0x11}
	var d Datagram
	var err error
	if n := testing.AllocsPerRun(100, func() { d, err = ParseDatagram(&wc, buf) }); n != 0 {
		t.Errorf("%v allocations per ParseDatagram", n)
	}
	if err != nil || string(d.Payload) != "hello" || d.SrcQP != 0x11 || d.GRH.Version != 4 {
		t.Fatalf("ParseDatagram = %+v, %v", d, err)
	}
	wc.Flags = 0
	if _, err := ParseDatagram(&wc, buf); !errors.Is(err, ErrNoGRH) {
		t.Errorf("without the GRH flag: %v", err)
	}
	wc = cq.WC{Flags: cq.GRH, ByteLen: 100}
	if _, err := ParseDatagram(&wc, buf); !errors.Is(err, ErrNoGRH) {
		t.Errorf("byte_len past the buffer: %v", err)
	}
}

// The masks each transport's transitions send: what ibv_uc_pingpong and
// ibv_ud_pingpong send, which the kernel's state table requires.
func TestTransportMask(t *testing.T) {
	all := func(typ Type, s State, m AttrMask) AttrMask { q := &QP{typ: typ}; return q.transportMask(s, m) }
	rtr := AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer
	rts := AttrState | AttrSQPSN | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic
	init := AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags
	for _, c := range []struct {
		typ      Type
		s        State
		in, want AttrMask
	}{
		{RC, StateRTR, rtr, rtr},
		{RC, StateRTS, rts, rts},
		{UC, StateInit, init, init},
		{UC, StateRTR, rtr, AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN},
		{UC, StateRTS, rts, AttrState | AttrSQPSN},
		{UD, StateInit, init, AttrState | AttrPKeyIndex | AttrPort | AttrQKey},
		{UD, StateRTR, rtr, AttrState},
		{UD, StateRTS, rts, AttrState | AttrSQPSN},
	} {
		if got := all(c.typ, c.s, c.in); got != c.want {
			t.Errorf("%v %v: mask %#x, want %#x", c.typ, c.s, got, c.want)
		}
	}
}

func TestConnectRefusesUD(t *testing.T) {
	q := &QP{typ: UD}
	if err := q.Connect(Peer{QPN: 1, GID: uverbs.GID{15: 1}}, ConnectOptions{}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("Connect on UD: %v, want EINVAL", err)
	}
	if err := (&QP{typ: RC}).ActivateUD(UDOptions{}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("ActivateUD on RC: %v, want EINVAL", err)
	}
	if err := (&QP{typ: RC}).AttachMulticast(uverbs.GID{}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("AttachMulticast on RC: %v, want EINVAL", err)
	}
}
