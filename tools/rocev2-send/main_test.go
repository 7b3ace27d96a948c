package main

import (
	"testing"

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
	} {
		if _, err := parseOptions(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
