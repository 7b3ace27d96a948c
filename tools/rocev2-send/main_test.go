package main

import (
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp"
	"github.com/pureverbs/pureverbs/server/framecheck"
)

func TestParseOptions(t *testing.T) {
	o, err := parseOptions([]string{"-s", "1-9000", "-c", "4", "-C", "16", "-op", "write", "-rkey", "0x1234", "10.99.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.minSize != 1 || o.maxSize != 9000 || o.channels != 4 || o.chanBase != 16 || o.op != qp.RDMAWrite || o.rkey != 0x1234 || o.host != "10.99.0.1" {
		t.Fatalf("%+v", o)
	}
	for _, bad := range [][]string{
		{},                                    // no server
		{"-s", "9-1", "h"},                    // reversed range
		{"-s", "x", "h"},                      // not a size
		{"-c", "0", "h"},                      // no channels
		{"-C", "250", "-c", "8", "h"},         // past channel 255
		{"-w", "0", "h"},                      // no ring
		{"-n", "0", "h"},                      // endless without -t
		{"-op", "read", "h"},                  // unknown operation
		{"-reconnect", "-1", "h"},             // not a count
		{"-drop", "-2", "h"},                  // not a sequence number
		{"-corrupt", "3", "-fill=false", "h"}, // nothing filled to corrupt
	} {
		if _, err := parseOptions(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestReconnectWait(t *testing.T) {
	want := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000, 2000}
	for i, w := range want {
		if got := reconnectWait(i + 1); got != w*time.Millisecond {
			t.Errorf("attempt %d waits %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
}

func TestAbandonedFrames(t *testing.T) {
	z := newStreamer(&options{count: 100, channels: 1})
	z.head, z.tail = 40, 31
	if r := z.abandon(); r != (frameRange{31, 39}) || z.tail != 40 || !z.more() {
		t.Fatalf("abandon: %v, tail %d", r, z.tail)
	}
	z.head = 57
	z.tail = 56
	z.abandon()
	if got := z.unackedSummary(); got != "31..39 56 (10 frames)" {
		t.Errorf("summary %q", got)
	}
	z.head = 100
	if z.more() {
		t.Error("more frames after -n")
	}
}

// The test faults reach a checking receiver as exactly one lost and one
// corrupt frame, the frame count unchanged; without them every frame checks.
func TestFillFaults(t *testing.T) {
	for _, tc := range []struct {
		args                 []string
		lost, corrupt, total uint64
	}{
		{[]string{"h"}, 0, 0, 20},
		{[]string{"-drop", "3", "-corrupt", "12", "h"}, 1, 1, 20},
		{[]string{"-drop", "0", "h"}, 1, 0, 20},
		{[]string{"-corrupt", "0", "h"}, 0, 1, 20},
	} {
		o, err := parseOptions(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		z := newStreamer(o)
		var c framecheck.Checker
		for head := range tc.total {
			b := make([]byte, 9+int(head)*97%2000) // 9..2008 bytes: the short and the checksummed format
			z.fill(b, head)
			c.Check(b)
		}
		if c.Frames != tc.total || c.Lost != tc.lost || c.Corrupt != tc.corrupt || c.Duplicate != 0 {
			t.Errorf("%q: %d frames, %d lost, %d corrupt, %d duplicate; want %d, %d, %d, 0",
				tc.args, c.Frames, c.Lost, c.Corrupt, c.Duplicate, tc.total, tc.lost, tc.corrupt)
		}
	}
}
