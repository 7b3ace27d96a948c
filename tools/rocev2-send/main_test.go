package main

import (
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/qp"
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
		{},                            // no server
		{"-s", "9-1", "h"},            // reversed range
		{"-s", "x", "h"},              // not a size
		{"-c", "0", "h"},              // no channels
		{"-C", "250", "-c", "8", "h"}, // past channel 255
		{"-w", "0", "h"},              // no ring
		{"-n", "0", "h"},              // endless without -t
		{"-op", "read", "h"},          // unknown operation
		{"-reconnect", "-1", "h"},     // not a count
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
