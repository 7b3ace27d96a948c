//go:build integration

package integration

import (
	"errors"
	"maps"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const udQKey = 0x11111111 // ibv_ud_pingpong's

// openUD opens a UD end on dev, posts n receives of GRHLen+size bytes
// (receive i at offset i*(GRHLen+size), wr_id i) and activates it with
// qkey.
func openUD(t *testing.T, dev string, qkey uint32, n, size int) *qpEnd {
	t.Helper()
	e := openEnd(t, dev, endOpts{typ: qp.UD, bufSize: 64 << 10})
	if err := e.qp.ToInit(qp.InitParams{QKey: qkey}); err != nil {
		t.Fatal(err)
	}
	postUDRecvs(t, e, 0, n, size)
	if err := e.qp.ActivateUD(qp.UDOptions{QKey: qkey, SendPSN: psn(e.qp)}); err != nil {
		t.Fatal(err)
	}
	if attr, err := e.qp.Query(); err != nil || attr.State != qp.StateRTS || attr.QKey != qkey {
		t.Fatalf("UD QP after ActivateUD: state %v, qkey %#x, %v", attr.State, attr.QKey, err)
	}
	return e
}

// newAH makes an address handle, closed at cleanup (before the PD).
func newAH(t *testing.T, pd *uverbs.PD, p qp.AHSpec) *qp.AH {
	t.Helper()
	ah, err := qp.NewAH(pd, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, "AH", ah.Close()) })
	return ah
}

func postUDRecvs(t *testing.T, e *qpEnd, first, n, size int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		if err := e.qp.PostRecv([]qp.RecvWR{{ID: uint64(i), SGEs: []uverbs.SGE{sge(e, i*(qp.GRHLen+size), qp.GRHLen+size)}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// udSend sends msg (written at offset GRHLen of a's buffer, as
// ibv_ud_pingpong does) to qpn through ah, and waits for the send's
// completion.
func udSend(t *testing.T, a *qpEnd, ah *qp.AH, qpn, qkey uint32, msg string, op qp.SendOpcode, imm uint32) cq.WC {
	t.Helper()
	copy(a.buf.Bytes()[qp.GRHLen:], msg)
	wr := qp.SendWR{ID: 77, Opcode: op, Flags: qp.Signaled, Imm: imm, AH: ah, RemoteQPN: qpn, RemoteQKey: qkey,
		SGEs: []uverbs.SGE{sge(a, qp.GRHLen, len(msg))}}
	if err := a.qp.PostSend([]qp.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	return pollWait(t, a.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]
}

// A datagram from rxe0 to rxe1 through an address handle made from the
// peer's GID: the kernel assigned an AH number, the WQE carried only it
// (the host test TestEncodeUDBytes pins the empty av), and the datagram
// arrived with the GRH area describing the path: IPv4 10.99.0.1 →
// 10.99.0.2 as GIDs, TTL 64 (the route's, not the AH's 1), the sender's QPN, the
// immediate data. With the AH closed the same request is refused before
// posting (ErrClosed). RDMA opcodes are refused on UD before posting.
func TestUDAddressHandle(t *testing.T) {
	devs := devices(t, 2)
	a, b := openUD(t, devs[0], udQKey, 4, 1024), openUD(t, devs[1], udQKey, 4, 1024)
	ah := newAH(t, a.pd, qp.AHSpec{DGID: b.gid, SGID: a.sgid, HopLimit: 1})
	if ah.Num() == 0 || ah.Verbs().Attr().GRH.DGID != b.gid {
		t.Fatalf("AH number %d, attr %+v", ah.Num(), ah.Verbs().Attr())
	}
	t.Logf("AH handle %d, ah_num %d", ah.Verbs().Handle(), ah.Num())
	msg := strings.Repeat("datagram!", 100)[:900]
	if s := udSend(t, a, ah, b.qp.Num(), udQKey, msg, qp.SendWithImm, 0xc0ffee); s.Status != cq.Success || s.Opcode != cq.OpSend {
		t.Fatalf("send completion %+v", s)
	}
	w := pollWait(t, b.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]
	if w.Status != cq.Success || w.Opcode != cq.OpRecv || w.Flags&cq.GRH == 0 || w.Flags&cq.WithImm == 0 || w.Imm != 0xc0ffee ||
		w.ByteLen != uint32(qp.GRHLen+len(msg)) || w.SrcQP != a.qp.Num() || w.QPNum != b.qp.Num() {
		t.Fatalf("receive completion %+v", w)
	}
	d, err := qp.ParseDatagram(&w, b.buf.Bytes()[int(w.WRID)*(qp.GRHLen+1024):])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GRH %+v src %v dst %v", d.GRH, d.GRH.Src(), d.GRH.Dst())
	// The kernel resolves a unicast RoCE AH's hop limit from the route
	// (ib_resolve_eth_dmac): 64 arrives whatever the AH asked for.
	if d.GRH.Version != 4 || d.GRH.SGID != a.gid || d.GRH.DGID != b.gid || d.GRH.HopLimit != 64 || d.SrcQP != a.qp.Num() || string(d.Payload) != msg ||
		d.GRH.Src() != netip.AddrFrom4([4]byte(a.gid.To4())) || d.GRH.Dst() != netip.AddrFrom4([4]byte(b.gid.To4())) {
		t.Fatalf("datagram %+v", d)
	}
	for _, op := range []qp.SendOpcode{qp.RDMAWrite, qp.RDMAWriteWithImm, qp.RDMARead} {
		err := a.qp.PostSend([]qp.SendWR{{Opcode: op, AH: ah, RemoteQPN: b.qp.Num(), SGEs: []uverbs.SGE{sge(a, 0, 8)}}})
		if !errors.Is(err, qp.ErrOpcodeTransport) {
			t.Errorf("UD %v: %v, want ErrOpcodeTransport", op, err)
		}
	}
	if err := a.qp.PostSend([]qp.SendWR{{Opcode: qp.Send, RemoteQPN: b.qp.Num(), SGEs: []uverbs.SGE{sge(a, 0, 8)}}}); !errors.Is(err, qp.ErrOpcodeTransport) {
		t.Errorf("UD send without an AH: %v", err)
	}
	if err := ah.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ah.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// The kernel may have handed the AH's number to another AH by now:
	// the request is refused before it is posted.
	err = a.qp.PostSend([]qp.SendWR{{Opcode: qp.Send, Flags: qp.Signaled, AH: ah, RemoteQPN: b.qp.Num(), RemoteQKey: udQKey, SGEs: []uverbs.SGE{sge(a, qp.GRHLen, 8)}}})
	if !errors.Is(err, qp.ErrClosed) {
		t.Fatalf("a send through a closed AH: %v, want ErrClosed", err)
	}
	quiet(t, a.cq, "after a send through the closed AH was refused")
	quiet(t, b.cq, "after the AH was destroyed")
}

// Datagrams carrying the wrong Q_Key are dropped by the receiver (the
// sender sees success), the right one is delivered first thing after them.
// A Q_Key with the top bit set is sent as it is: rxe does not substitute
// the sending QP's Q_Key.
func TestUDQKey(t *testing.T) {
	devs := devices(t, 2)
	a, b := openUD(t, devs[0], udQKey, 4, 64), openUD(t, devs[1], udQKey, 4, 64)
	ah := newAH(t, a.pd, qp.AHSpec{DGID: b.gid, SGID: a.sgid})
	for _, k := range []uint32{0x22222222, udQKey + 1, 0x80000000} {
		if s := udSend(t, a, ah, b.qp.Num(), k, "wrong key", qp.Send, 0); s.Status != cq.Success {
			t.Fatalf("send with Q_Key %#x: %+v", k, s)
		}
	}
	quiet(t, b.cq, "datagrams with a wrong Q_Key")
	udSend(t, a, ah, b.qp.Num(), udQKey, "right key", qp.Send, 0)
	w := pollWait(t, b.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]
	d, err := qp.ParseDatagram(&w, b.buf.Bytes()[int(w.WRID)*(qp.GRHLen+64):])
	if err != nil || w.WRID != 0 || string(d.Payload) != "right key" {
		t.Fatalf("first delivery: %+v %q %v", w, d.Payload, err)
	}
	quiet(t, b.cq, "after the right key")
}

// setMTU sets a netdev's MTU and waits for the rxe port on it to follow.
func setMTU(t *testing.T, ctx *uverbs.Context, netdev string, mtu int, want uverbs.MTU) {
	t.Helper()
	l, err := netlink.LinkByName(netdev)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetMTU(l, mtu); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := ctx.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		if p.ActiveMTU == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s MTU %d: port active MTU %v, want %v", netdev, mtu, p.ActiveMTU, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rdma_rxe completes a UD send longer than the port's MTU as successful
// and sends nothing. Shown with a QP created while the netdevs had a
// 9000-byte MTU (active MTU 4096, so pureverbs' limit is 4096), after the
// MTU went back to 1500 (1024): a 2048-byte send "succeeds", rxe0's
// sent_pkts does not move and nothing arrives. A QP created at the 1024
// MTU refuses the same send before posting (ErrMessageTooLong), and sends
// up to the MTU.
func TestUDLongerThanMTU(t *testing.T) {
	devs := devices(t, 2)
	a0, b := openUD(t, devs[0], udQKey, 0, 4096), openUD(t, devs[1], udQKey, 4, 4096)
	t.Cleanup(func() {
		setMTU(t, a0.ctx, "veth0", 1500, uverbs.MTU1024)
		setMTU(t, b.ctx, "veth1", 1500, uverbs.MTU1024)
	})
	setMTU(t, a0.ctx, "veth0", 9000, uverbs.MTU4096)
	setMTU(t, b.ctx, "veth1", 9000, uverbs.MTU4096)
	stale := openUD(t, devs[0], udQKey, 0, 4096)
	ah := newAH(t, stale.pd, qp.AHSpec{DGID: b.gid, SGID: stale.sgid})
	msg := strings.Repeat("x", 2048)
	udSend(t, stale, ah, b.qp.Num(), udQKey, msg, qp.Send, 0)
	if w := pollWait(t, b.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]; w.Status != cq.Success || w.ByteLen != uint32(qp.GRHLen+2048) {
		t.Fatalf("2048 bytes at MTU 4096: %+v", w)
	}
	setMTU(t, a0.ctx, "veth0", 1500, uverbs.MTU1024)
	sent := hwCounter(t, devs[0], "sent_pkts")
	s := udSend(t, stale, ah, b.qp.Num(), udQKey, msg, qp.Send, 0)
	after := hwCounter(t, devs[0], "sent_pkts")
	t.Logf("raw 2048-byte UD send at MTU 1024: completion %+v, sent_pkts %d -> %d", s, sent, after)
	if s.Status != cq.Success || after != sent {
		t.Fatalf("rxe did not behave as documented: completion %+v, sent_pkts %d -> %d", s, sent, after)
	}
	quiet(t, b.cq, "the oversized datagram")

	fresh := openUD(t, devs[0], udQKey, 0, 4096)
	ah2 := newAH(t, fresh.pd, qp.AHSpec{DGID: b.gid, SGID: fresh.sgid})
	err := fresh.qp.PostSend([]qp.SendWR{{Opcode: qp.Send, AH: ah2, RemoteQPN: b.qp.Num(), RemoteQKey: udQKey, SGEs: []uverbs.SGE{sge(fresh, 0, 1025)}}})
	if !errors.Is(err, qp.ErrMessageTooLong) {
		t.Fatalf("1025 bytes at MTU 1024: %v, want ErrMessageTooLong", err)
	}
	quiet(t, fresh.cq, "a refused send")
	udSend(t, fresh, ah2, b.qp.Num(), udQKey, msg[:1024], qp.Send, 0)
	if w := pollWait(t, b.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]; w.Status != cq.Success || w.ByteLen != uint32(qp.GRHLen+1024) {
		t.Fatalf("1024 bytes at MTU 1024: %+v", w)
	}
}

// One datagram sent to a multicast group reaches both UD QPs attached to
// it on rxe1; after one detaches, only the other receives. The group is the
// IPv4-mapped GID of 239.1.2.3; veth1 accepts the group's traffic through a
// socket's membership (an attach makes no IGMP join), and the sender
// addresses QPN 0xffffff. The QP still attached at the end closes all
// the same.
func TestUDMulticast(t *testing.T) {
	devs := devices(t, 2)
	group := netip.MustParseAddr("239.1.2.3")
	gid := uverbs.GID(group.As16())
	ifi, err := net.InterfaceByName("veth1")
	if err != nil {
		t.Fatal(err)
	}
	sock, err := net.ListenMulticastUDP("udp4", ifi, &net.UDPAddr{IP: net.IP(group.AsSlice()), Port: 4792})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	a := openUD(t, devs[0], udQKey, 0, 256)
	r1, r2 := openUD(t, devs[1], udQKey, 4, 256), openUD(t, devs[1], udQKey, 4, 256)
	for _, r := range []*qpEnd{r1, r2} {
		if err := r.qp.AttachMulticast(gid); err != nil {
			t.Fatal(err)
		}
	}
	ah := newAH(t, a.pd, qp.AHSpec{DGID: gid, SGID: a.sgid})
	if s := udSend(t, a, ah, qp.MulticastQPN, udQKey, "to the group", qp.Send, 0); s.Status != cq.Success {
		t.Fatalf("multicast send: %+v", s)
	}
	for i, r := range []*qpEnd{r1, r2} {
		w := pollWait(t, r.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]
		d, err := qp.ParseDatagram(&w, r.buf.Bytes()[int(w.WRID)*(qp.GRHLen+256):])
		if err != nil || string(d.Payload) != "to the group" || d.GRH.DGID != gid || d.SrcQP != a.qp.Num() {
			t.Fatalf("receiver %d: %+v %+v %v", i+1, w, d, err)
		}
		t.Logf("receiver %d (QPN %#x): %q from QPN %#x, %v -> %v, TTL %d", i+1, r.qp.Num(), d.Payload, d.SrcQP, d.GRH.Src(), d.GRH.Dst(), d.GRH.HopLimit)
	}
	if err := r2.qp.DetachMulticast(gid); err != nil {
		t.Fatal(err)
	}
	udSend(t, a, ah, qp.MulticastQPN, udQKey, "after detach", qp.Send, 0)
	w := pollWait(t, r1.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]
	if d, err := qp.ParseDatagram(&w, r1.buf.Bytes()[int(w.WRID)*(qp.GRHLen+256):]); err != nil || string(d.Payload) != "after detach" {
		t.Fatalf("attached receiver after the detach: %+v %v", w, err)
	}
	quiet(t, r2.cq, "the detached receiver")
	// r1 stays attached: its Close (at cleanup, checked) detaches it first,
	// as uverbs refuses (EBUSY) to destroy an attached QP.
}

// UD post and poll allocate nothing.
func TestUDZeroAllocs(t *testing.T) {
	devs := devices(t, 2)
	a, b := openUD(t, devs[0], udQKey, 0, 64), openUD(t, devs[1], udQKey, 0, 64)
	ah := newAH(t, a.pd, qp.AHSpec{DGID: b.gid, SGID: a.sgid})
	send := []qp.SendWR{{Opcode: qp.Send, Flags: qp.Signaled, AH: ah, RemoteQPN: b.qp.Num(), RemoteQKey: udQKey, SGEs: []uverbs.SGE{sge(a, qp.GRHLen, 64)}}}
	recv := []qp.RecvWR{{SGEs: []uverbs.SGE{sge(b, 0, qp.GRHLen+64)}}}
	wc := make([]cq.WC, 2)
	round := func() {
		if err := b.qp.PostRecv(recv); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.PostSend(send); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*cq.CQ{a.cq, b.cq} {
			deadline := time.Now().Add(10 * time.Second)
			for n := 0; n == 0; n, _ = c.Poll(wc) {
				if time.Now().After(deadline) {
					t.Fatal("no completion after 10 s")
				}
			}
		}
		if _, err := qp.ParseDatagram(&wc[0], b.buf.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	round()
	if n := testing.AllocsPerRun(50, round); n != 0 {
		t.Fatalf("%v allocations per UD round trip", n)
	}
}

// Context.Close destroys an address handle (and a UD QP attached to a
// multicast group) left open, before the PD: the close succeeds (the
// kernel refuses to free a PD an AH still uses), the kernel's counts are
// back where they were, and the AH's own Close afterwards does nothing.
func TestUDContextCloseFreesAH(t *testing.T) {
	name := devices(t, 1)[0]
	d, err := uverbs.DeviceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	before := rdmaResources(t, name)
	ctx, err := uverbs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cq.New(ctx, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := qp.New(pd, qp.Spec{Type: qp.UD, SendCQ: c, RecvCQ: c})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.ActivateUD(qp.UDOptions{QKey: udQKey}); err != nil {
		t.Fatal(err)
	}
	group := uverbs.GID(netip.MustParseAddr("::ffff:239.1.2.4").As16())
	if err := q.AttachMulticast(group); err != nil {
		t.Fatal(err)
	}
	port, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	gid, idx := mappedGID(t, name, port)
	var ahs []*qp.AH
	for range 3 {
		ah, err := qp.NewAH(pd, qp.AHSpec{DGID: gid, SGID: uverbs.GIDEntry{GID: gid, Index: idx, Port: 1}})
		if err != nil {
			t.Fatal(err)
		}
		ahs = append(ahs, ah)
	}
	if err := ctx.Close(); err != nil {
		t.Fatalf("Context.Close with live AHs: %v", err)
	}
	if after := rdmaResources(t, name); !maps.Equal(after, before) {
		t.Fatalf("kernel counts after Context.Close %v, before %v", after, before)
	}
	for _, ah := range ahs {
		if err := ah.Close(); err != nil {
			t.Errorf("AH.Close after Context.Close: %v", err)
		}
	}
	if err := q.AttachMulticast(group); err == nil {
		t.Error("attach_mcast on a QP of a closed Context succeeded")
	}
}

// linkLocalGID is the end's IPv6 link-local RoCE v2 GID (fe80::/64).
func linkLocalGID(t *testing.T, e *qpEnd) uverbs.GIDEntry {
	t.Helper()
	table, err := e.ctx.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range table {
		if g.Port == 1 && g.GID.Addr().IsLinkLocalUnicast() && !g.GID.Addr().Is4In6() {
			return g
		}
	}
	t.Fatalf("%s has no link-local GID: %+v", e.dev, table)
	return uverbs.GIDEntry{}
}

// Over the IPv6 link-local GIDs the GRH area holds a real IPv6 header:
// version 6, the two link-local addresses, the route's hop limit.
func TestUDIPv6GRH(t *testing.T) {
	devs := devices(t, 2)
	a, b := openUD(t, devs[0], udQKey, 0, 256), openUD(t, devs[1], udQKey, 2, 256)
	src, dst := linkLocalGID(t, a), linkLocalGID(t, b)
	// The kernel resolves the neighbour in create_ah; the first resolution
	// of a link-local peer may time out (ETIMEDOUT) while ND runs.
	var ah *qp.AH
	for try := 1; ; try++ {
		var err error
		if ah, err = qp.NewAH(a.pd, qp.AHSpec{DGID: dst.GID, SGID: src}); err == nil {
			t.Cleanup(func() { closeOK(t, "AH", ah.Close()) })
			break
		}
		t.Logf("create_ah towards %v, try %d: %v", dst.GID, try, err)
		if !errors.Is(err, unix.ETIMEDOUT) || try == 5 {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	if s := udSend(t, a, ah, b.qp.Num(), udQKey, "over IPv6", qp.SendWithImm, 6); s.Status != cq.Success {
		t.Fatalf("send: %+v", s)
	}
	w := pollWait(t, b.cq, make([]cq.WC, 1), 1, 10*time.Second)[0]
	raw := b.buf.Bytes()[int(w.WRID)*(qp.GRHLen+256):]
	d, err := qp.ParseDatagram(&w, raw)
	if err != nil {
		t.Fatalf("%v; GRH area % x", err, raw[:qp.GRHLen])
	}
	t.Logf("IPv6 GRH %+v: %v -> %v", d.GRH, d.GRH.Src(), d.GRH.Dst())
	if d.GRH.Version != 6 || d.GRH.SGID != src.GID || d.GRH.DGID != dst.GID || !d.GRH.Src().Is6() || d.GRH.HopLimit == 0 ||
		string(d.Payload) != "over IPv6" || d.SrcQP != a.qp.Num() || w.Imm != 6 {
		t.Fatalf("datagram %+v, completion %+v", d, w)
	}
}
