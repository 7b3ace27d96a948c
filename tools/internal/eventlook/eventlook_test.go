package eventlook

import "testing"

// A wait kind whose looks find events looks on every wait; one whose looks
// find none backs off to one look in maxSkip+1 waits, and is back to every
// wait after its first hit.
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
	// The next look due hits: every wait looks again.
	for l.left > 0 {
		l.due()
	}
	if n := looks(20, true); n != 20 {
		t.Fatalf("after a hit: %d looks in 20 waits, want 20", n)
	}
}
