package gidflag

import (
	"flag"
	"net/netip"
	"testing"
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
