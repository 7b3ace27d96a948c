//go:build integration

package integration

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// FindGID and NetdevGID give the IPv4-mapped RoCE v2 entry the topology
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
		if _, err := ctx.FindGID(1, netip.MustParseAddr("192.0.2.7")); !errors.Is(err, uverbs.ErrGIDUnused) {
			t.Errorf("%s: FindGID of an address it does not have: %v, want ErrGIDUnused", name, err)
		}
	}
}
