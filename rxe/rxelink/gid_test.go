package rxelink

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
)

// gidTable writes port 1 of device name: entries as sysfs prints them
// (index -> "gid type ndev"), unused ones all zeros without a type.
func gidTable(t *testing.T, sys, name string, size int, entries map[int][3]string) {
	t.Helper()
	port := filepath.Join(sys, "class/infiniband", name, "ports/1")
	for i := range size {
		n := strconv.Itoa(i)
		e, ok := entries[i]
		if !ok {
			write(t, filepath.Join(port, "gids", n), "0000:0000:0000:0000:0000:0000:0000:0000\n")
			continue
		}
		write(t, filepath.Join(port, "gids", n), e[0]+"\n")
		write(t, filepath.Join(port, "gid_attrs/types", n), e[1]+"\n")
		write(t, filepath.Join(port, "gid_attrs/ndevs", n), e[2]+"\n")
	}
	write(t, filepath.Join(sys, "class/infiniband", name, "parent"), "veth7\n")
	write(t, filepath.Join(sys, "class/net/veth7/ifindex"), "7\n")
}

func fakeAddrs(t *testing.T, addrs ...string) {
	saved := netdevAddrs
	t.Cleanup(func() { netdevAddrs = saved })
	netdevAddrs = func(netdev string) ([]netip.Addr, error) {
		if netdev != "veth7" {
			t.Errorf("addresses asked of %q, want veth7", netdev)
		}
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

// The IPv4 entry found where it is (index 3 here, as on a 6.12 link whose
// IPv6 entries came first), not at index 1.
func TestWaitGIDFindsTheEntryWhereverItIs(t *testing.T) {
	sys := fakeSysfs(t)
	gidTable(t, sys, "rxe9", 8, map[int][3]string{
		0: {"fe80:0000:0000:0000:0000:00ff:fe00:0001", "IB/RoCE v1", "veth7"},
		1: {"fe80:0000:0000:0000:0000:00ff:fe00:0001", "RoCE v2", "veth7"},
		2: {"0000:0000:0000:0000:0000:ffff:0a62:0001", "IB/RoCE v1", "veth7"},
		3: {"0000:0000:0000:0000:0000:ffff:0a62:0001", "RoCE v2", "veth7"},
	})
	fakeAddrs(t, "10.98.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	g, err := WaitGID(ctx, "rxe9", netip.MustParseAddr("::ffff:10.98.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	want := uverbs.GIDEntry{GID: uverbs.GID(netip.MustParseAddr("::ffff:10.98.0.1").As16()), Index: 3, Port: 1, Type: uverbs.GIDTypeRoCEv2, NetdevIndex: 7}
	if g != want {
		t.Errorf("WaitGID = %+v, want %+v", g, want)
	}
	gids, err := WaitGIDs(ctx, "rxe9")
	if err != nil {
		t.Fatal(err)
	}
	if len(gids) != 2 || gids[0].Index != 1 || gids[1] != want {
		t.Errorf("WaitGIDs = %v, want the RoCE v2 entries 1 and 3", gids)
	}
}

// An address the table does not have: an error by the deadline that names
// the device, the address and what the table holds.
func TestWaitGIDTimesOutNamingTheTable(t *testing.T) {
	sys := fakeSysfs(t)
	gidTable(t, sys, "rxe9", 4, map[int][3]string{
		1: {"fe80:0000:0000:0000:0000:00ff:fe00:0001", "RoCE v2", "veth7"},
	})
	fakeAddrs(t, "10.98.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := WaitGID(ctx, "rxe9", netip.MustParseAddr("10.98.0.1"))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "rxe9 has no RoCE v2 GID of 10.98.0.1") ||
		!strings.Contains(err.Error(), "fe80::ff:fe00:1") {
		t.Errorf("WaitGID of a missing address: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("WaitGID returned after %v, its deadline was 200ms", d)
	}
	_, err = WaitGIDs(ctx, "rxe9")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no RoCE v2 GID of 10.98.0.1") {
		t.Errorf("WaitGIDs without the IPv4 entry: %v", err)
	}
}
