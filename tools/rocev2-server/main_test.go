package main

import (
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
