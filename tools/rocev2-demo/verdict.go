package main

import (
	"errors"
	"fmt"
	"strings"
)

// verdict is what the demo reads from its two programs' summaries.
type verdict struct {
	rate      string // rocev2-server's "frames N, bytes B in T s: R frames/s, M MB/s"
	received  uint64 // frames rocev2-server counted
	sent      uint64 // frames rocev2-send saw acknowledged
	lost      uint64 // sequence numbers that never arrived
	corrupt   uint64 // payloads whose checksum or filler did not match
	duplicate uint64 // sequence numbers seen again or going backwards: out of order
}

// readVerdict parses rocev2-server's summary (run with -check) and
// rocev2-send's "sent N frames" line. A summary without the check's
// "N lost, M corrupt" line is an error, not a pass: that is how a server
// started without -check looked to the demo before.
func readVerdict(server, sender string) (verdict, error) {
	var v verdict
	var haveRate, haveCheck, haveSent bool
	for _, l := range strings.Split(server, "\n") {
		switch {
		case strings.HasPrefix(l, "frames "):
			if _, err := fmt.Sscanf(l, "frames %d,", &v.received); err != nil {
				return v, fmt.Errorf("rocev2-server's rate line %q: %w", l, err)
			}
			v.rate, haveRate = l, true
		case strings.Contains(l, " lost, ") && strings.Contains(l, " corrupt"):
			if _, err := fmt.Sscanf(l, "%d lost, %d corrupt", &v.lost, &v.corrupt); err != nil {
				return v, fmt.Errorf("rocev2-server's check line %q: %w", l, err)
			}
			if _, dup, ok := strings.Cut(l, " corrupt, "); ok {
				if _, err := fmt.Sscanf(dup, "%d duplicate", &v.duplicate); err != nil {
					return v, fmt.Errorf("rocev2-server's check line %q: %w", l, err)
				}
			}
			haveCheck = true
		}
	}
	for _, l := range strings.Split(sender, "\n") {
		if strings.HasPrefix(l, "sent ") {
			if _, err := fmt.Sscanf(l, "sent %d frames", &v.sent); err != nil {
				return v, fmt.Errorf("rocev2-send's summary %q: %w", l, err)
			}
			haveSent = true
		}
	}
	var missing []string
	if !haveRate {
		missing = append(missing, "rocev2-server printed no rate line (frames N, ...)")
	}
	if !haveCheck {
		missing = append(missing, `rocev2-server printed no check line ("N lost, M corrupt": was it run with -check?)`)
	}
	if !haveSent {
		missing = append(missing, "rocev2-send printed no summary (sent N frames ...)")
	}
	if len(missing) > 0 {
		return v, errors.New(strings.Join(missing, "; "))
	}
	return v, nil
}

// check fails unless every frame sent was counted once, in order, intact.
func (v verdict) check() error {
	var bad []string
	if v.received == 0 {
		bad = append(bad, "no frames arrived")
	}
	if v.received != v.sent {
		bad = append(bad, fmt.Sprintf("%d frames counted of %d sent", v.received, v.sent))
	}
	if v.lost != 0 {
		bad = append(bad, fmt.Sprintf("%d lost", v.lost))
	}
	if v.duplicate != 0 {
		bad = append(bad, fmt.Sprintf("%d out of order or duplicated", v.duplicate))
	}
	if v.corrupt != 0 {
		bad = append(bad, fmt.Sprintf("%d corrupt", v.corrupt))
	}
	if len(bad) > 0 {
		return fmt.Errorf("verdict: %s", strings.Join(bad, ", "))
	}
	return nil
}
