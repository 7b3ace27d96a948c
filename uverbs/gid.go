package uverbs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GID is a 128-bit global identifier in network byte order. For RoCE it is
// an IPv6 address, or an IPv4-mapped one (::ffff:a.b.c.d).
type GID [16]byte

// IsZero reports whether g is all zeros, which marks an unused table slot.
func (g GID) IsZero() bool { return g == GID{} }

// Addr returns g as an IP address.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g) }

// To4 returns the IPv4 address of an IPv4-mapped GID, or nil.
func (g GID) To4() net.IP {
	if a := g.Addr(); a.Is4In6() {
		v4 := a.Unmap().As4()
		return net.IP(v4[:])
	}
	return nil
}

// String formats g as an IPv6 address, e.g. "::ffff:10.99.0.1" or
// "fe80::1".
func (g GID) String() string { return g.Addr().String() }

// GIDType is enum ib_uverbs_gid_type.
type GIDType uint8

// GID types.
const (
	GIDTypeIB     GIDType = 0
	GIDTypeRoCEv1 GIDType = 1
	GIDTypeRoCEv2 GIDType = 2
)

// String names the GID type ("IB", "RoCE v1", "RoCE v2").
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint8(t))
}

// GIDEntry is one populated slot of a port's GID table.
type GIDEntry struct {
	GID         GID
	Index       int   // slot in the port's table (the sgid_index of an address vector)
	Port        uint8 // 1-based port
	Type        GIDType
	NetdevIndex int // ifindex of the netdev the GID belongs to, 0 if none
}

func gidEntryFrom(e *gidEntry) GIDEntry {
	return GIDEntry{
		GID:         GID(e.GID),
		Index:       int(e.GIDIndex),
		Port:        uint8(e.PortNum),
		Type:        GIDType(e.GIDType),
		NetdevIndex: int(e.NetdevIfindex),
	}
}

// QueryGIDTable returns every populated GID of every port, with its type and
// netdev (UVERBS_METHOD_QUERY_GID_TABLE; from sysfs, as libibverbs does,
// when the kernel lacks the method or the driver id is unknown). All-zero
// entries are never returned.
func (c *Context) QueryGIDTable() ([]GIDEntry, error) {
	const verb = "query_gid_table"
	if _, ok := c.ioctlDriver(ioctlQueryGIDTable); !ok {
		return c.sysfsGIDTable(verb)
	}
	dev, err := c.QueryDevice()
	if err != nil {
		return nil, err
	}
	total := 0
	for p := 1; p <= dev.PhysPortCnt; p++ {
		pa, err := c.QueryPort(uint8(p))
		if err != nil {
			return nil, err
		}
		total += pa.GIDTableLen
	}
	if total == 0 {
		return nil, nil
	}
	raw := make([]gidEntry, total)
	var (
		num     uint64
		numAttr *ioctlAttr
	)
	done, err := c.tryIoctl(ioctlQueryGIDTable, verb, func(driverID uint32) *ioctlBuf {
		var b *ioctlBuf
		b, numAttr = queryGIDTableCmd(driverID, raw, &num)
		return b
	})
	if !done {
		return c.sysfsGIDTable(verb)
	}
	if err != nil {
		return nil, err
	}
	if numAttr.Flags&attrFValidOutput == 0 || num > uint64(total) {
		return nil, fmt.Errorf("uverbs: %s: kernel reported %d entries for a table of %d", verb, num, total)
	}
	out := make([]GIDEntry, 0, num)
	for i := range raw[:num] {
		if GID(raw[i].GID).IsZero() {
			continue
		}
		out = append(out, gidEntryFrom(&raw[i]))
	}
	return out, nil
}

// QueryGID returns the GID at index of port (UVERBS_METHOD_QUERY_GID_ENTRY;
// from sysfs, as libibverbs does, when the kernel lacks the method or the
// driver id is unknown). An unpopulated slot yields an error wrapping
// ErrGIDUnused.
func (c *Context) QueryGID(port uint8, index int) (GIDEntry, error) {
	const verb = "query_gid_entry"
	if index < 0 || index > 1<<31-1 {
		return GIDEntry{}, fmt.Errorf("uverbs: %s: index %d out of range: %w", verb, index, unix.EINVAL)
	}
	var e gidEntry
	done, err := c.tryIoctl(ioctlQueryGIDEntry, verb, func(driverID uint32) *ioctlBuf {
		return queryGIDEntryCmd(driverID, port, uint32(index), &e)
	})
	if !done {
		return c.sysfsGID(verb, port, index)
	}
	if err != nil {
		// The GID cache answers ENODATA for a slot that holds nothing.
		if errors.Is(err, unix.ENODATA) {
			return GIDEntry{}, fmt.Errorf("uverbs: %s: port %d index %d: %w (%w)", verb, port, index, ErrGIDUnused, err)
		}
		return GIDEntry{}, err
	}
	if GID(e.GID).IsZero() {
		return GIDEntry{}, fmt.Errorf("uverbs: %s: port %d index %d: %w", verb, port, index, ErrGIDUnused)
	}
	return gidEntryFrom(&e), nil
}

// queryGIDTableCmd builds UVERBS_METHOD_QUERY_GID_TABLE as libibverbs 44
// does (_ibv_query_gid_table): entry size, flags 0, the entry array, and the
// count; it returns the count attribute to check the kernel's output flag.
func queryGIDTableCmd(driverID uint32, entries []gidEntry, num *uint64) (*ioctlBuf, *ioctlAttr) {
	size := unsafe.Sizeof(entries[0])
	b := newIoctl(objectDevice, methodQueryGIDTable, driverID)
	b.constIn(attrQueryGIDTableEntrySize, uint64(size))
	b.u32In(attrQueryGIDTableFlags, 0)
	b.ptrOut(attrQueryGIDTableRespEntries, unsafe.Pointer(&entries[0]), len(entries)*int(size))
	return b, b.ptrOut(attrQueryGIDTableRespNumEntrys, unsafe.Pointer(num), int(unsafe.Sizeof(*num)))
}

// queryGIDEntryCmd builds UVERBS_METHOD_QUERY_GID_ENTRY as libibverbs 44
// does (_ibv_query_gid_ex); the kernel requires the flags attribute.
func queryGIDEntryCmd(driverID uint32, port uint8, index uint32, e *gidEntry) *ioctlBuf {
	b := newIoctl(objectDevice, methodQueryGIDEntry, driverID)
	b.constIn(attrQueryGIDEntryPort, uint64(port))
	b.constIn(attrQueryGIDEntryGIDIndex, uint64(index))
	b.u32In(attrQueryGIDEntryFlags, 0)
	b.ptrOut(attrQueryGIDEntryRespEntry, unsafe.Pointer(e), int(unsafe.Sizeof(*e)))
	return b
}

// FindGID returns the RoCE v2 GID of port whose address is ip: for an IPv4
// address, its IPv4-mapped GID (::ffff:a.b.c.d). It is how a program finds
// the GID index to use from the address it configured, instead of assuming
// an index. No such entry is an error wrapping ErrGIDUnused.
func (c *Context) FindGID(port uint8, ip netip.Addr) (GIDEntry, error) {
	want := GID(ip.As16()) // As16 maps IPv4 into IPv6
	return c.findGID(port, "address "+ip.String(), func(e *GIDEntry) bool { return e.GID == want }, nil)
}

// NetdevGID returns the RoCE v2 GID of port that belongs to the network
// device named ifname, preferring an IPv4-mapped one (what rdma-core's tools
// use with -g on rxe) over an IPv6 one. No such entry is an error wrapping
// ErrGIDUnused.
func (c *Context) NetdevGID(port uint8, ifname string) (GIDEntry, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return GIDEntry{}, fmt.Errorf("uverbs: GID of netdev %s: %w", ifname, err)
	}
	return c.findGID(port, "netdev "+ifname,
		func(e *GIDEntry) bool { return e.NetdevIndex == ifi.Index },
		func(e *GIDEntry) bool { return e.GID.To4() != nil })
}

// findGID reads the GID table once and returns the first RoCE v2 entry of
// port that match accepts, the first that prefer also accepts if there is
// one (prefer may be nil).
func (c *Context) findGID(port uint8, what string, match, prefer func(*GIDEntry) bool) (GIDEntry, error) {
	table, err := c.QueryGIDTable()
	if err != nil {
		return GIDEntry{}, err
	}
	var first *GIDEntry
	for i := range table {
		e := &table[i]
		if e.Port != port || e.Type != GIDTypeRoCEv2 || !match(e) {
			continue
		}
		if prefer == nil || prefer(e) {
			return *e, nil
		}
		if first == nil {
			first = e
		}
	}
	if first != nil {
		return *first, nil
	}
	return GIDEntry{}, fmt.Errorf("uverbs: no RoCE v2 GID for %s on %s port %d: %w", what, c.dev.Name, port, ErrGIDUnused)
}

// PortGID returns the RoCE v2 GID of the network device port runs on,
// preferring an IPv4-mapped one, as NetdevGID does for a named netdev:
// the GID a program uses by default, found by what it is rather than by
// an index (the order of a fresh link's entries is not fixed). A port
// with GIDs of several netdevs is refused: choose with NetdevGID or
// FindGID there. No RoCE v2 entry is an error wrapping ErrGIDUnused.
func (c *Context) PortGID(port uint8) (GIDEntry, error) {
	table, err := c.QueryGIDTable()
	if err != nil {
		return GIDEntry{}, err
	}
	netdev := 0
	for _, e := range table {
		if e.Port != port || e.Type != GIDTypeRoCEv2 || e.NetdevIndex == 0 || e.NetdevIndex == netdev {
			continue
		}
		if netdev != 0 {
			return GIDEntry{}, fmt.Errorf("uverbs: GID of %s port %d: GIDs of netdevs %d and %d: choose one with NetdevGID or FindGID: %w", c.dev.Name, port, netdev, e.NetdevIndex, unix.EINVAL)
		}
		netdev = e.NetdevIndex
	}
	if netdev == 0 {
		return GIDEntry{}, fmt.Errorf("uverbs: no RoCE v2 GID of a netdev on %s port %d: %w", c.dev.Name, port, ErrGIDUnused)
	}
	return c.findGID(port, fmt.Sprintf("netdev %d", netdev),
		func(e *GIDEntry) bool { return e.NetdevIndex == netdev },
		func(e *GIDEntry) bool { return e.GID.To4() != nil })
}
