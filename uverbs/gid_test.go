package uverbs

import (
	"errors"
	"testing"
)

// PortGID finds the port's netdev from its GID entries and returns that
// netdev's IPv4-mapped RoCE v2 GID wherever the table holds it (here at
// index 3, behind the RoCE v1 and IPv6 entries); it refuses to guess
// between netdevs, and says ErrGIDUnused when the port has no RoCE v2 GID.
func TestPortGID(t *testing.T) {
	c, _ := fakeContext(t)
	f := &fakeSysfs{t: t, root: t.TempDir()}
	c.sysfs = f.root
	d := "class/infiniband/fake0/ports/1/"
	f.write(d+"link_layer", "Ethernet\n")
	slot := func(i, gid, typ, ndev string) {
		f.write(d+"gids/"+i, gid+"\n")
		f.write(d+"gid_attrs/types/"+i, typ+"\n")
		f.write(d+"gid_attrs/ndevs/"+i, ndev+"\n")
	}
	slot("0", "fe80:0000:0000:0000:3870:7aff:fee0:be33", "IB/RoCE v1", "veth0")
	slot("1", "fe80:0000:0000:0000:3870:7aff:fee0:be33", "RoCE v2", "veth0")
	slot("2", "0000:0000:0000:0000:0000:ffff:0a63:0001", "IB/RoCE v1", "veth0")
	slot("3", "0000:0000:0000:0000:0000:ffff:0a63:0001", "RoCE v2", "veth0")
	f.write("class/net/veth0/ifindex", "3\n")
	e, err := c.PortGID(1)
	want := GIDEntry{GID: GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 15: 1}, Index: 3, Port: 1, Type: GIDTypeRoCEv2, NetdevIndex: 3}
	if err != nil || e != want {
		t.Fatalf("PortGID(1) = %+v, %v; want %+v", e, err, want)
	}
	if _, err := c.PortGID(2); !errors.Is(err, ErrGIDUnused) {
		t.Errorf("PortGID of a port without GIDs = %v, want ErrGIDUnused", err)
	}
	slot("4", "0000:0000:0000:0000:0000:ffff:0a64:0001", "RoCE v2", "veth1")
	f.write("class/net/veth1/ifindex", "4\n")
	if e, err := c.PortGID(1); err == nil {
		t.Errorf("PortGID with GIDs of two netdevs = %+v, want an error", e)
	}
}
