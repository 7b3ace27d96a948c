// Package gidflag is the -g flag of rocev2-server and rocev2-send: the
// local GID chosen by address or by index, or by default the RoCE v2 GID
// of the port's netdev, never an index assumed to hold it.
package gidflag

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/pureverbs/pureverbs/uverbs"
)

// Usage is the flag's help text.
const Usage = "local RoCE v2 GID: its IP address or its table index (default: the port's netdev's, IPv4-mapped preferred)"

// Value is a -g flag: Addr when an address was given, else Index, which
// is -1 (none) by default.
type Value struct {
	Addr  netip.Addr
	Index int
}

// New is a Value that chooses by default.
func New() *Value { return &Value{Index: -1} }

// Set parses an IP address or a non-negative index.
func (v *Value) Set(s string) error {
	if a, err := netip.ParseAddr(s); err == nil {
		v.Addr, v.Index = a, -1
		return nil
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 {
		return fmt.Errorf("%q is neither an IP address nor a GID index", s)
	}
	v.Addr, v.Index = netip.Addr{}, i
	return nil
}

// String is the flag's value as given ("" by default).
func (v *Value) String() string {
	switch {
	case v == nil:
		return ""
	case v.Addr.IsValid():
		return v.Addr.String()
	case v.Index >= 0:
		return strconv.Itoa(v.Index)
	}
	return ""
}

// Entry looks the chosen GID up on port of c: by address (FindGID, which
// takes RoCE v2 entries only), by index (QueryGID; an entry of another
// type is refused), or else the netdev's (PortGID).
func (v *Value) Entry(c *uverbs.Context, port uint8) (uverbs.GIDEntry, error) {
	switch {
	case v.Addr.IsValid():
		return c.FindGID(port, v.Addr)
	case v.Index >= 0:
		g, err := c.QueryGID(port, v.Index)
		if err != nil {
			return g, err
		}
		return g, roceV2(g, v.Index)
	}
	return c.PortGID(port)
}

// roceV2 refuses an entry chosen by index that is not RoCE v2: its frames
// would go out as RoCE v1 (no IP/UDP header), which a RoCE v2 peer drops
// without a word.
func roceV2(g uverbs.GIDEntry, index int) error {
	if g.Type != uverbs.GIDTypeRoCEv2 {
		return fmt.Errorf("GID index %d (%v) is %v, not RoCE v2: choose a RoCE v2 entry (-g with its IP address picks one)", index, g.GID, g.Type)
	}
	return nil
}
