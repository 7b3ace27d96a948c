package rxelink

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
)

// GID is one populated entry of a port's GID table, as sysfs shows it.
type GID struct {
	Index  int
	Addr   netip.Addr // the GID as an IPv6 address; an IPv4 one is unmapped (10.0.0.1, not ::ffff:10.0.0.1)
	Type   string     // "RoCE v2" or "IB/RoCE v1"
	Netdev string     // the netdev the entry belongs to
}

// RoCEv2 is the Type of a RoCE v2 (UDP/IP) entry, the only kind rxe's
// peers on IP networks use.
const RoCEv2 = "RoCE v2"

func (g GID) String() string {
	return fmt.Sprintf("%d %s %s %s", g.Index, g.Addr, g.Type, g.Netdev)
}

// GIDs returns the populated entries of port 1 of the RDMA device name, in
// index order. An entry being written while it is read may be missing.
func GIDs(name string) ([]GID, error) {
	port := filepath.Join(sysfs, "class/infiniband", name, "ports/1")
	ents, err := os.ReadDir(filepath.Join(port, "gids"))
	if err != nil {
		return nil, fmt.Errorf("rxelink: GID table of %s: %w", name, err)
	}
	var gids []GID
	for i := range len(ents) {
		g, ok := readGID(port, i)
		if ok {
			gids = append(gids, g)
		}
	}
	return gids, nil
}

// readGID reads entry i; an unused entry (all zeros, or no type: the
// kernel answers EINVAL) is not ok.
func readGID(port string, i int) (GID, bool) {
	n := strconv.Itoa(i)
	b, err := os.ReadFile(filepath.Join(port, "gids", n))
	if err != nil {
		return GID{}, false
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(b)))
	if err != nil || a.IsUnspecified() {
		return GID{}, false
	}
	t, err := os.ReadFile(filepath.Join(port, "gid_attrs/types", n))
	if err != nil {
		return GID{}, false
	}
	nd, _ := os.ReadFile(filepath.Join(port, "gid_attrs/ndevs", n))
	return GID{Index: i, Addr: a.Unmap(), Type: strings.TrimSpace(string(t)), Netdev: strings.TrimSpace(string(nd))}, true
}

// pollGIDs is how often the waits look at the table again.
const pollGIDs = 50 * time.Millisecond

// WaitGID waits, until ctx is done, for the RoCE v2 entry of address ip on
// the RDMA device name and returns it. The kernel fills a new link's table
// from netdev events in no fixed order, so the index is whatever the
// entry got; use it rather than assuming one.
func WaitGID(ctx context.Context, name string, ip netip.Addr) (GID, error) {
	ip = ip.Unmap()
	for {
		gids, err := GIDs(name)
		for _, g := range gids {
			if g.Addr == ip && g.Type == RoCEv2 {
				return g, nil
			}
		}
		if ctx.Err() != nil {
			if err == nil {
				err = errors.New("no such entry")
			}
			return GID{}, fmt.Errorf("rxelink: %s has no RoCE v2 GID of %s (table: %v): %w: %w", name, ip, gids, err, ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollGIDs):
		}
	}
}

// WaitGIDs waits, until ctx is done, until the RDMA device name has a RoCE
// v2 entry for every IPv4 address of its netdev (for at least one address,
// when the netdev has no IPv4 address), and returns its RoCE v2 entries.
func WaitGIDs(ctx context.Context, name string) ([]GID, error) {
	for {
		gids, missing, err := roceV2(name)
		if err == nil && missing == "" {
			return gids, nil
		}
		if ctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("no RoCE v2 GID of %s yet (RoCE v2 entries: %v)", missing, gids)
			}
			return nil, fmt.Errorf("rxelink: %s: %w: %w", name, err, ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollGIDs):
		}
	}
}

// roceV2 returns name's RoCE v2 entries and the first IPv4 address of its
// netdev that has none ("any address" when neither exists).
func roceV2(name string) (gids []GID, missing string, err error) {
	all, err := GIDs(name)
	if err != nil {
		return nil, "", err
	}
	have := map[netip.Addr]bool{}
	for _, g := range all {
		if g.Type == RoCEv2 {
			gids = append(gids, g)
			have[g.Addr] = true
		}
	}
	addrs, err := netdevAddrs(parent(name))
	if err != nil {
		return gids, "", err
	}
	for _, a := range addrs {
		if !have[a] {
			return gids, a.String(), nil
		}
	}
	if len(gids) == 0 {
		return nil, "any address", nil
	}
	return gids, "", nil
}

// netdevIPv4 lists the IPv4 addresses of a netdev ("" has none).
func netdevIPv4(netdev string) ([]netip.Addr, error) {
	if netdev == "" {
		return nil, nil
	}
	l, err := netlink.LinkByName(netdev)
	if err != nil {
		return nil, fmt.Errorf("netdev %s: %w", netdev, err)
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", netdev, err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			out = append(out, ip)
		}
	}
	return out, nil
}

// netdevAddrs is how roceV2 learns a netdev's addresses; tests replace it.
var netdevAddrs = netdevIPv4
