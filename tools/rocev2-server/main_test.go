package main

import (
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/server/framecheck"
)

func TestLostRanges(t *testing.T) {
	var c framecheck.Checker
	b := make([]byte, 20)
	for _, seq := range []uint64{0, 1, 5, 6, 8} {
		framecheck.Fill(b, seq)
		c.Check(b)
	}
	c.Expect(12)
	if got, want := lostRanges(&c), "2..4 7 9..11"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	for seq := uint64(20); seq < 20+2*framecheck.MaxLostRanges; seq += 2 {
		framecheck.Fill(b, seq)
		c.Check(b)
	}
	if got := lostRanges(&c); got[len(got)-len(" and 3 more"):] != " and 3 more" {
		t.Errorf("%q, want the count of unnamed lost frames at the end", got)
	}
}

// -allow takes prefixes and bare addresses (one host), comma-separated,
// and may be given more than once; anything else is refused.
func TestAllowFlag(t *testing.T) {
	o, err := parseOptions([]string{"-allow", "10.99.0.0/24, 192.0.2.7", "-allow", "fe80::1,10.1.2.3/8"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range o.allow {
		got = append(got, p.String())
	}
	if want := "10.99.0.0/24 192.0.2.7/32 fe80::1/128 10.0.0.0/8"; strings.Join(got, " ") != want {
		t.Errorf("-allow parsed as %v, want %s", got, want)
	}
	for _, bad := range []string{"", "10.99.0.0/33", "host.example", "10.99.0.1,"} {
		if _, err := parseOptions([]string{"-allow", bad}); err == nil {
			t.Errorf("-allow %q accepted", bad)
		}
	}
}
