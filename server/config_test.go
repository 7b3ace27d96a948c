package server

import (
	"errors"
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
		{"negative GID index", func(c *Config) { c.GIDIndex = -1 }, "GID index -1"},
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
