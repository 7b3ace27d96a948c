package server

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/uverbs"
)

func TestConfigRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no device", func(c *Config) { c.Device = "" }, "no device"},
		{"zero depth", func(c *Config) { c.Depth = 0 }, "receive depth 0"},
		{"zero payload", func(c *Config) { c.MaxPayload = 0 }, "max payload 0"},
		{"slab over 4 GiB", func(c *Config) { c.Depth, c.MaxPayload = 1<<16, 1<<16+1 }, "exceeds 4 GiB"},
		{"min RNR 0", func(c *Config) { c.MinRNRTimer = 0 }, "655"},
		{"min RNR 32", func(c *Config) { c.MinRNRTimer = 32 }, "out of range 1..31"},
		{"PMTU 6", func(c *Config) { c.PathMTU = 6 }, "path MTU 6 out of range 1..5"},
		{"negative GID index", func(c *Config) { c.GIDIndex = -2 }, "GID index -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig("rxe0")
			tc.edit(&c)
			_, err := c.normalize()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrConfig naming %q", err, tc.want)
			}
			// New refuses before it looks for the device.
			if _, err := New(c); !errors.Is(err, ErrConfig) {
				t.Fatalf("New: %v", err)
			}
		})
	}
	c, err := DefaultConfig("rxe0").normalize()
	if err != nil || c.SpinBudget != DefaultSpinBudget || c.PollBatch != DefaultPollBatch || c.Port != 1 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c = DefaultConfig("rxe0")
	c.Depth, c.MaxPayload = 1<<16, 1<<16 // exactly 4 GiB is allowed
	if _, err := c.normalize(); err != nil {
		t.Fatal(err)
	}
}

func TestPathMTUAgainstPort(t *testing.T) {
	if err := checkPathMTU(uverbs.MTU4096, uverbs.MTU1024); err == nil || !strings.Contains(err.Error(), "above the port's active MTU") {
		t.Fatalf("4096 on a 1024 port: %v", err)
	}
	if err := checkPathMTU(uverbs.MTU1024, uverbs.MTU1024); err != nil {
		t.Fatal(err)
	}
	if err := checkPathMTU(0, 0); err == nil {
		t.Fatal("PMTU 0 accepted")
	}
}

// The side channel's wire record is qp.Peer's text and a NUL, 52 bytes,
// as ibv_rc_pingpong writes it.
func TestPeerRecord(t *testing.T) {
	p := qp.Peer{QPN: 0x11, PSN: 0xabcdef, GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 2}}
	rec := record(p)
	want := "0000:000011:abcdef:00000000000000000000ffff0a630002\x00"
	if string(rec) != want || len(rec) != qp.PeerRecordLen {
		t.Fatalf("record %q (%d bytes), want %q", rec, len(rec), want)
	}
}

func TestRogueGID(t *testing.T) {
	g := uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}
	if s := rogueGID(g); s != "0000:0000:0000:0000:0000:ffff:0a63:0001" {
		t.Fatal(s)
	}
}

// gidTable answers the GID queries localGID makes, as rxe on 6.12 may
// order a fresh link's table: the IPv4-mapped RoCE v2 GID is not at 1.
type gidTable struct{ calls []string }

var (
	linkLocalV2 = uverbs.GIDEntry{GID: uverbs.GID{0: 0xfe, 1: 0x80, 15: 1}, Index: 1, Port: 1, Type: uverbs.GIDTypeRoCEv2, NetdevIndex: 3}
	ipv4V2      = uverbs.GIDEntry{GID: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 15: 1}, Index: 3, Port: 1, Type: uverbs.GIDTypeRoCEv2, NetdevIndex: 3}
)

func (g *gidTable) QueryGID(port uint8, index int) (uverbs.GIDEntry, error) {
	g.calls = append(g.calls, "QueryGID")
	if index == 1 {
		return linkLocalV2, nil
	}
	return ipv4V2, nil
}

func (g *gidTable) FindGID(port uint8, ip netip.Addr) (uverbs.GIDEntry, error) {
	g.calls = append(g.calls, "FindGID "+ip.String())
	return ipv4V2, nil
}

func (g *gidTable) PortGID(port uint8) (uverbs.GIDEntry, error) {
	g.calls = append(g.calls, "PortGID")
	return ipv4V2, nil
}

// The default Config chooses the local GID by what it is (the RoCE v2
// GID of the port's netdev, IPv4-mapped preferred), not by an index whose
// entry depends on the table's order; an address or an index given
// explicitly is used as given.
func TestLocalGIDChoice(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want uverbs.GIDEntry
		call string
	}{
		{"default", func(*Config) {}, ipv4V2, "PortGID"},
		{"address", func(c *Config) { c.GIDAddr = netip.MustParseAddr("10.99.0.1") }, ipv4V2, "FindGID 10.99.0.1"},
		{"index", func(c *Config) { c.GIDIndex = 1 }, linkLocalV2, "QueryGID"},
	} {
		c := DefaultConfig("rxe0")
		tc.edit(&c)
		c, err := c.normalize()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var g gidTable
		e, err := localGID(&g, c)
		if err != nil || e != tc.want || len(g.calls) != 1 || g.calls[0] != tc.call {
			t.Errorf("%s: localGID = %+v, %v after %q; want %+v after %q", tc.name, e, err, g.calls, tc.want, tc.call)
		}
	}
}
