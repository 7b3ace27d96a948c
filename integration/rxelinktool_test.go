//go:build integration

package integration

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/rxe/rxelink"
	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
)

// rxe-link, the minimal host's tool, on a fresh veth: load (a no-op in the
// usual VM; under make itest-bare, where the guest leaves rdma_rxe and
// crc32_generic on disk unloaded, it must load them from modules.dep), add
// prints the RoCE v2 GID of the veth's
// address at the index the kernel gave it, list shows the link on its
// netdev, delete refuses while this process holds a Context on it (naming
// this process and its fd, within its timeout) and succeeds after Close.
func TestRxeLinkTool(t *testing.T) {
	const netdev, peerdev, name = "vrxl0", "vrxl1", "rxl0"
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: netdev}, PeerName: peerdev}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netlink.LinkDel(veth) })
	link, err := netlink.LinkByName(netdev)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr("10.97.0.1/24")
	if err := netlink.AddrAdd(link, addr); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{netdev, peerdev} {
		ll, _ := netlink.LinkByName(l)
		if err := netlink.LinkSetUp(ll); err != nil {
			t.Fatal(err)
		}
	}
	bare := strings.Contains(os.Getenv("RXEVM_UNLOADED"), "rdma_rxe")
	if bare && rxelink.Loaded("rdma_rxe") {
		t.Fatal("rdma_rxe is loaded in a run whose guest was told not to load it (RXEVM_UNLOADED)")
	}
	runPeer(t, 30*time.Second, "rxe-link", "load")
	if !rxelink.Loaded("rdma_rxe") {
		t.Fatal("rdma_rxe is not loaded after rxe-link load")
	}
	if bare {
		t.Logf("rxe-link load loaded rdma_rxe (kernel had it on disk only)")
	}
	added := runPeer(t, 60*time.Second, "rxe-link", "add", "-timeout", "30s", name, netdev)
	var index string
	for _, l := range strings.Split(added, "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[0] == name && f[2] == "::ffff:10.97.0.1" && f[3] == netdev {
			index = f[1]
		}
	}
	if index == "" {
		t.Fatalf("rxe-link add printed no RoCE v2 GID ::ffff:10.97.0.1 on %s:\n%s", netdev, added)
	}
	// The index it printed is the one the device's own GID query has.
	dev, err := uverbs.DeviceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := uverbs.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	i, _ := strconv.Atoi(index)
	g, err := ctx.QueryGID(1, i)
	if err != nil || !net.IP(g.GID[:]).Equal(net.ParseIP("10.97.0.1")) || g.Type != uverbs.GIDTypeRoCEv2 {
		t.Errorf("GID %s is %+v, %v; rxe-link printed ::ffff:10.97.0.1 RoCE v2", index, g, err)
	}
	if gids := runPeer(t, 30*time.Second, "rxe-link", "gids", name); gids != added {
		t.Errorf("rxe-link gids printed\n%s\nrxe-link add printed\n%s", gids, added)
	}
	if list := runPeer(t, 30*time.Second, "rxe-link", "list"); !strings.Contains(list, name+" "+netdev+"\n") {
		t.Errorf("rxe-link list lacks %q:\n%s", name+" "+netdev, list)
	}

	held := startPeer(t, 60*time.Second, "rxe-link", "delete", "-timeout", "2s", name)
	<-held.done
	out := held.out.String()
	if held.err == nil || !strings.Contains(out, "is still open") || !strings.Contains(out, "pid "+strconv.Itoa(os.Getpid())+" (") {
		t.Errorf("rxe-link delete of a link this test holds open: err %v:\n%s", held.err, out)
	}
	if !exists(name) {
		t.Fatalf("rxe-link delete removed %s while it was held", name)
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
	runPeer(t, 30*time.Second, "rxe-link", "delete", name)
	if exists(name) {
		t.Errorf("%s still exists after rxe-link delete", name)
	}
	if list := runPeer(t, 30*time.Second, "rxe-link", "list"); strings.Contains(list, name+" ") {
		t.Errorf("rxe-link list still shows %s:\n%s", name, list)
	}
}

func exists(rdma string) bool {
	_, err := netlink.RdmaLinkByName(rdma)
	return err == nil
}
