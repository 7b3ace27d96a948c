package gidflag

import (
	"flag"
	"net/netip"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

func TestValue(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		addr  string
		index int
	}{
		{nil, "", -1},
		{[]string{"-g", "3"}, "", 3},
		{[]string{"-g", "10.99.0.1"}, "10.99.0.1", -1},
		{[]string{"-g", "fe80::1"}, "fe80::1", -1},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		v := New()
		fs.Var(v, "g", Usage)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		var want netip.Addr
		if tc.addr != "" {
			want = netip.MustParseAddr(tc.addr)
		}
		if v.Addr != want || v.Index != tc.index {
			t.Errorf("%q: %+v, want address %q index %d", tc.args, *v, tc.addr, tc.index)
		}
	}
	for _, bad := range []string{"-1", "x", "10.99.0"} {
		if err := New().Set(bad); err == nil {
			t.Errorf("-g %q accepted", bad)
		}
	}
}

func TestRoCEv2Only(t *testing.T) {
	g := uverbs.GIDEntry{GID: uverbs.GID{0: 0xfe, 1: 0x80, 15: 1}, Type: uverbs.GIDTypeRoCEv2}
	if err := roceV2(g, 1); err != nil {
		t.Errorf("a RoCE v2 entry refused: %v", err)
	}
	for _, typ := range []uverbs.GIDType{uverbs.GIDTypeRoCEv1, uverbs.GIDTypeIB} {
		g.Type = typ
		err := roceV2(g, 0)
		if err == nil || !strings.Contains(err.Error(), "not RoCE v2") {
			t.Errorf("%v entry: %v, want a refusal", typ, err)
		}
	}
}
