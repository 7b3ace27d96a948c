package main

import (
	"net"
	"strings"
	"testing"
)

// The demo takes the index rxe-link printed for the address, wherever the
// kernel put it, and refuses output without it.
func TestGIDIndexFromRxeLinkOutput(t *testing.T) {
	out := "rxd0 0 fe80::44fe:ceff:feda:135c vdemo0\nrxd0 1 fe80::44fe:ceff:feda:135c vdemo0\nrxd0 3 ::ffff:10.96.0.1 vdemo0\n"
	got, err := gidIndex(out, "rxd0", net.ParseIP("10.96.0.1"))
	if err != nil || got != "3" {
		t.Errorf("gidIndex = %q, %v; want 3", got, err)
	}
	if _, err := gidIndex(out, "rxd1", net.ParseIP("10.96.0.1")); err == nil || !strings.Contains(err.Error(), "rxd1") {
		t.Errorf("another device's lines: %v, want an error naming rxd1", err)
	}
	if _, err := gidIndex(out, "rxd0", net.ParseIP("10.96.0.2")); err == nil {
		t.Error("an address rxe-link did not print was found")
	}
}
