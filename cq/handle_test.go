package cq

import (
	"testing"
	"weak"
)

// CQ user handles are unique across channels, so that an async event's
// handle names one CQ of the Context.
func TestHandlesUniqueAcrossChannels(t *testing.T) {
	seen := map[uint64]bool{}
	for range 2 {
		ch := &Channel{cqs: map[uint64]weak.Pointer[CQ]{}}
		ch.changed()
		for range 3 {
			h, err := ch.reserve()
			if err != nil {
				t.Fatal(err)
			}
			if h == 0 || seen[h] {
				t.Fatalf("handle %d given twice (or zero)", h)
			}
			seen[h] = true
		}
	}
}
