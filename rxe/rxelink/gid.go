package rxelink

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/vishvananda/netlink"
)

// GIDs returns the populated entries of port 1 of the RDMA device name,
// in index order, as sysfs shows them (uverbs.SysfsGIDTable: one GID
// entry type and one reader for every package). A table being filled may
// fail to read; the waits below read it again.
func GIDs(name string) ([]uverbs.GIDEntry, error) {
	all, err := uverbs.SysfsGIDTable(sysfs, name)
	if err != nil {
		return nil, fmt.Errorf("rxelink: GID table of %s: %w", name, err)
	}
	gids := all[:0]
	for _, g := range all {
		if g.Port == 1 {
			gids = append(gids, g)
		}
	}
	return gids, nil
}

// addr is the entry's GID as an IP address, an IPv4 one unmapped
// (10.0.0.1, not ::ffff:10.0.0.1).
func addr(g uverbs.GIDEntry) netip.Addr { return g.GID.Addr().Unmap() }

// pollGIDs is how often the waits look at the table again.
const pollGIDs = 50 * time.Millisecond

// WaitGID waits, until ctx is done, for the RoCE v2 entry of address ip on
// the RDMA device name and returns it. The kernel fills a new link's table
// from netdev events in no fixed order, so the index is whatever the
// entry got; use it rather than assuming one.
func WaitGID(ctx context.Context, name string, ip netip.Addr) (uverbs.GIDEntry, error) {
	ip = ip.Unmap()
	for {
		gids, err := GIDs(name)
		for _, g := range gids {
			if addr(g) == ip && g.Type == uverbs.GIDTypeRoCEv2 {
				return g, nil
			}
		}
		if ctx.Err() != nil {
			if err == nil {
				err = errors.New("no such entry")
			}
			return uverbs.GIDEntry{}, fmt.Errorf("rxelink: %s has no RoCE v2 GID of %s (table: %v): %w: %w", name, ip, gids, err, ctx.Err())
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
func WaitGIDs(ctx context.Context, name string) ([]uverbs.GIDEntry, error) {
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
func roceV2(name string) (gids []uverbs.GIDEntry, missing string, err error) {
	all, err := GIDs(name)
	if err != nil {
		return nil, "", err
	}
	have := map[netip.Addr]bool{}
	for _, g := range all {
		if g.Type == uverbs.GIDTypeRoCEv2 {
			gids = append(gids, g)
			have[addr(g)] = true
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
