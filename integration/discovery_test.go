//go:build integration

package integration

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
)

// A test of its own making, end to end: a fresh veth pair and rxe link made
// with netlink, its uverbs device found through sysfs, its port state and GID
// table read with pureverbs' own commands and checked against the address
// netlink reports for the veth.
func TestRxeLinkOnNewVeth(t *testing.T) {
	const (
		netdev = "vtest0"
		peer   = "vtest1"
		ibdev  = "rxetest0"
	)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: netdev}, PeerName: peer}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("add veth %s/%s: %v", netdev, peer, err)
	}
	t.Cleanup(func() { netlink.LinkDel(veth) })
	link, err := netlink.LinkByName(netdev)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := netlink.ParseAddr("10.98.0.1/24")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrAdd(link, addr); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{netdev, peer} {
		ll, err := netlink.LinkByName(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(ll); err != nil {
			t.Fatal(err)
		}
	}
	if err := netlink.RdmaLinkAdd(ibdev, "rxe", netdev); err != nil {
		t.Fatalf("rdma link add %s type rxe netdev %s: %v", ibdev, netdev, err)
	}
	t.Cleanup(func() { netlink.RdmaLinkDel(ibdev) })

	// The address as netlink reports it, not as this test wrote it.
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil || len(addrs) != 1 {
		t.Fatalf("addresses of %s: %v %v", netdev, addrs, err)
	}
	want := uverbs.GID{10: 0xff, 11: 0xff}
	copy(want[12:], addrs[0].IP.To4())

	dev := waitDevice(t, ibdev)
	if _, err := os.Stat(dev.Path); err != nil {
		t.Fatalf("%s: uverbs device %s: %v", ibdev, dev.Path, err)
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()

	port := waitActive(t, ctx)
	if port.LinkLayer != uverbs.LinkLayerEthernet {
		t.Errorf("link layer %v, want Ethernet", port.LinkLayer)
	}
	if port.ActiveMTU != uverbs.MTU1024 {
		t.Errorf("active MTU %v on a 1500-byte veth, want 1024", port.ActiveMTU)
	}

	// Found by its address: a fresh link fills its GID table in no fixed
	// order (on 6.12 index 1 was once fe80::…, RoCE v2).
	var g uverbs.GIDEntry
	ip, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, err = ctx.FindGID(1, ip)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the RoCE v2 GID of %v: %v", ip, err)
	}
	if g.GID != want || g.Type != uverbs.GIDTypeRoCEv2 || g.NetdevIndex != link.Attrs().Index {
		t.Errorf("GID %d = %v %v netdev %d, want %v RoCE v2 netdev %d (%s)",
			g.Index, g.GID, g.Type, g.NetdevIndex, want, link.Attrs().Index, netdev)
	}
	if !net.IP(g.GID[:]).Equal(addrs[0].IP) {
		t.Errorf("GID %v does not map %v", g.GID, addrs[0].IP)
	}
	// An index past the populated ones must be refused, not read as zeros.
	if _, err := ctx.QueryGID(1, port.GIDTableLen-1); !errors.Is(err, uverbs.ErrGIDUnused) {
		t.Errorf("GID %d: got %v, want ErrGIDUnused", port.GIDTableLen-1, err)
	}
	table, err := ctx.QueryGIDTable()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range table {
		if e.GID == (uverbs.GID{}) {
			t.Errorf("GID table returned an all-zero entry at %d", e.Index)
		}
		found = found || e == g
	}
	if !found {
		t.Errorf("GID table %v lacks %v", table, g)
	}
}

func waitDevice(t *testing.T, name string) uverbs.Device {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := uverbs.DeviceByName(name)
		if err == nil {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("uverbs device for %s: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitActive(t *testing.T, ctx *uverbs.Context) uverbs.PortAttr {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := ctx.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		if p.State == uverbs.PortActive {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("port 1 is %v after 10s, want ACTIVE", p.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
