package eventlook

import (
	"math/rand/v2"
	"testing"
)

// A wait kind whose looks find events looks on every wait; one whose looks
// find none backs off to one look in maxSkip+1 waits, and is back to every
// wait after a run of hits.
func TestLookBacksOff(t *testing.T) {
	var l Look
	looks := func(waits int, hit bool) int {
		n := 0
		for range waits {
			if l.due() {
				n++
				l.saw(hit)
			}
		}
		return n
	}
	if n := looks(100, true); n != 100 {
		t.Fatalf("hits: %d looks in 100 waits, want 100", n)
	}
	// Misses: a look, then 1, 2, 4, ... 64 skipped waits after each.
	if n := looks(1+2+3+5+9+17+33+65, false); n != 8 {
		t.Fatalf("misses: %d looks while the skips grow to %d, want 8", n, maxSkip)
	}
	if n := looks(10*(maxSkip+1), false); n != 10 {
		t.Fatalf("misses: %d looks in %d waits, want 10", n, 10*(maxSkip+1))
	}
	// The looks due hit: each lets the next wait look, and seven of them
	// halve the skip from maxSkip to none.
	for l.left > 0 {
		l.due()
	}
	if n := looks(20, true); n != 20 {
		t.Fatalf("after a hit: %d looks in 20 waits, want 20", n)
	}
	if l.skip != 0 {
		t.Fatalf("after 20 hits the skip is %d, want 0", l.skip)
	}
}

// A wait kind whose looks hit at even odds (where a look saves as much as
// it costs) looks on few of its waits; making every wait look after any hit
// looked on a third of them.
func TestLookEvenOddsStaysRare(t *testing.T) {
	var l Look
	r := rand.New(rand.NewPCG(1, 2))
	n := 0
	const waits = 100000
	for range waits {
		if l.due() {
			n++
			l.saw(r.IntN(2) == 0)
		}
	}
	if n > waits/8 {
		t.Fatalf("hits at even odds: %d looks in %d waits, want at most %d", n, waits, waits/8)
	}
}
