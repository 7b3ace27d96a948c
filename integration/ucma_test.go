//go:build integration

package integration

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp/rdmacm/ucma"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The raw ucma layer beyond what Dial and Listen use: an id resolved from
// rxe1's address reports its device, addresses, GIDs and path; TOS is set
// as an option; the id migrates to a second channel with its queued event;
// a UDP-space id joins and leaves an IPv4 multicast group (MULTICAST_JOIN
// with the group's address vector and Q_Key).
func TestUCMARaw(t *testing.T) {
	devices(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := ucma.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	ch2, err := ucma.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ch2.Close()

	id, err := ch.CreateID(1, ucma.PortSpaceTCP, uverbs.QPTypeRC)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.SetOption(id, 0, 0, []byte{0x20}); err != nil { // RDMA_OPTION_ID_TOS
		t.Errorf("set TOS: %v", err)
	}
	src, dst := netip.MustParseAddrPort("10.99.0.2:0"), netip.MustParseAddrPort("10.99.0.1:7800")
	if err := ch.ResolveAddr(id, src, dst, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	// The ADDR_RESOLVED event is queued on ch; the id moves to ch2 with it.
	time.Sleep(200 * time.Millisecond)
	if _, err := ch2.MigrateID(id, ch); err != nil {
		t.Fatal(err)
	}
	ev, err := ch2.WaitEvent(ctx)
	if err != nil || ev.Type != ucma.EventAddrResolved || ev.UID != 1 || ev.ID != id {
		t.Fatalf("after the migration: %+v, %v; want ADDR_RESOLVED of uid 1 on the new channel", ev, err)
	}
	if ev, err := ch.ReadEvent(); err == nil {
		t.Errorf("the old channel still has %v", ev.Type)
	}
	if err := ch2.ResolveRoute(id, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if ev, err = ch2.WaitEvent(ctx); err != nil || ev.Type != ucma.EventRouteResolved {
		t.Fatalf("route: %v, %v", ev.Type, err)
	}
	a, err := ch2.QueryAddr(id)
	if err != nil {
		t.Fatal(err)
	}
	rxe1, err := uverbs.DeviceByName(devices(t, 2)[1])
	if err != nil {
		t.Fatal(err)
	}
	if a.NodeGUID != rxe1.NodeGUID || a.Port != 1 || a.Src.Addr() != src.Addr() || a.Dst != dst {
		t.Errorf("query addr %+v; want rxe1 (%016x), port 1, %v -> %v", a, rxe1.NodeGUID, src.Addr(), dst)
	}
	g, err := ch2.QueryGID(id)
	if err != nil {
		t.Fatal(err)
	}
	if g.Src.Addr().Unmap() != src.Addr() || g.Dst.Addr().Unmap() != dst.Addr() {
		t.Errorf("query gid: %v -> %v", g.Src, g.Dst)
	}
	paths, err := ch2.QueryPath(id)
	if err != nil || len(paths) == 0 {
		t.Errorf("query path: %d paths, %v", len(paths), err)
	}
	if n, err := ch2.DestroyID(id); err != nil || n != 2 {
		t.Errorf("destroy: %d events reported, %v; want 2 (route and address, counted on the id)", n, err)
	}

	ud, err := ch.CreateID(2, ucma.PortSpaceUDP, uverbs.QPTypeUD)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Bind(ud, netip.MustParseAddrPort("10.99.0.1:0")); err != nil {
		t.Fatal(err)
	}
	group := netip.MustParseAddrPort("239.1.2.3:0")
	mc, err := ch.JoinMulticast(ud, 77, group, ucma.MulticastFullMember)
	if err != nil {
		t.Fatal(err)
	}
	ev, err = ch.WaitEvent(ctx)
	if err != nil || ev.Type != ucma.EventMulticastJoin || ev.UID != 77 {
		t.Fatalf("join: %+v, %v; want MULTICAST_JOIN for uid 77", ev, err)
	}
	p := ev.UDParam()
	if p.QPNum != 0xffffff || p.QKey == 0 || !p.AH.IsGlobal || p.AH.GRH.DGID.Addr().Unmap() != group.Addr() {
		t.Errorf("join parameters: %+v", p)
	}
	if _, err := ch.LeaveMulticast(mc); err != nil {
		t.Errorf("leave: %v", err)
	}
	if _, err := ch.DestroyID(ud); err != nil {
		t.Errorf("destroy: %v", err)
	}
	ch.Close()
	if _, err := ch.CreateID(3, ucma.PortSpaceTCP, uverbs.QPTypeRC); err == nil {
		t.Error("a command on a closed channel succeeded")
	}
}
