//go:build integration

package integration

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/pureverbs/pureverbs/server"
	"github.com/pureverbs/pureverbs/uverbs"
)

// FindGID, NetdevGID and PortGID give the IPv4-mapped RoCE v2 entry the topology
// made (at the index the harness found, as QueryGID reads it), and a clear ErrGIDUnused for an
// address the device does not have.
func TestUverbsFindGID(t *testing.T) {
	for i, name := range devices(t, 2) {
		ctx := uvOpen(t, name)
		netdev, gid := uvExpect(i)
		want, err := ctx.QueryGID(1, gidIndex(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if want.GID != gid {
			t.Fatalf("%s: GID %d is %v, the topology made %v", name, want.Index, want.GID, gid)
		}
		byIP, err := ctx.FindGID(1, netip.AddrFrom4([4]byte(gid.To4())))
		if err != nil || byIP != want {
			t.Errorf("%s: FindGID(%v) = %+v, %v; want %+v", name, gid, byIP, err, want)
		}
		byNetdev, err := ctx.NetdevGID(1, netdev)
		if err != nil || byNetdev != want {
			t.Errorf("%s: NetdevGID(%s) = %+v, %v; want %+v", name, netdev, byNetdev, err, want)
		}
		byPort, err := ctx.PortGID(1)
		if err != nil || byPort != want {
			t.Errorf("%s: PortGID(1) = %+v, %v; want %+v", name, byPort, err, want)
		}
		if _, err := ctx.FindGID(1, netip.MustParseAddr("192.0.2.7")); !errors.Is(err, uverbs.ErrGIDUnused) {
			t.Errorf("%s: FindGID of an address it does not have: %v, want ErrGIDUnused", name, err)
		}
	}
}

// A server on DefaultConfig sends from the IPv4-mapped RoCE v2 GID of its
// device's netdev, wherever the table holds it, and one given GIDAddr
// from that address's entry.
func TestServerDefaultGID(t *testing.T) {
	name := devices(t, 1)[0]
	_, gid := uvExpect(0)
	for _, addr := range []netip.Addr{{}, netip.AddrFrom4([4]byte(gid.To4()))} {
		cfg := server.DefaultConfig(name)
		cfg.GIDAddr = addr
		cfg.Depth = 4
		srv, err := server.New(cfg)
		if err != nil {
			t.Fatalf("GIDAddr %v: %v", addr, err)
		}
		if srv.GID() != gid {
			t.Errorf("GIDAddr %v: the server sends from %v, want the netdev's IPv4 GID %v", addr, srv.GID(), gid)
		}
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
