package main

import (
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// A record as Debian's ib_write_bw sent it (captured in the VM): the
// parser takes every field, and marshal gives back the same 108 bytes.
func TestDestRoundTrip(t *testing.T) {
	const wire = "0000:0080:000012:210e32:000003fc:0000560244d9e000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:63:00:01:00000000:"
	var msg [destLen]byte
	copy(msg[:], wire)
	d, err := parseDest(msg[:])
	if err != nil {
		t.Fatal(err)
	}
	want := dest{outReads: 0x80, qpn: 0x12, psn: 0x210e32, rkey: 0x3fc, vaddr: 0x560244d9e000,
		gid: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 15: 1}}
	if d != want {
		t.Fatalf("parsed %+v, want %+v", d, want)
	}
	var back [destLen]byte
	d.marshal(&back)
	if back != msg {
		t.Fatalf("marshal gave %q, want %q", back[:], msg[:])
	}
	if len(wire) != destLen-1 {
		t.Fatalf("the record is %d characters, want %d and a NUL", len(wire), destLen-1)
	}
}

// Records the parser must refuse: too few fields, a field that is not
// hexadecimal, a number wider than its field.
func TestDestRefused(t *testing.T) {
	for _, s := range []string{
		"",
		"0000:0080:000012",
		"0000:0080:00zz12:210e32:000003fc:0000560244d9e000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:63:00:01:00000000:",
		"0000:0080:000012:210e32:000003fc:0000560244d9e000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:63:00:1ff:00000000:",
	} {
		if _, err := parseDest([]byte(s)); err == nil {
			t.Errorf("parseDest(%q) accepted it", s)
		} else if !strings.Contains(err.Error(), "record") {
			t.Errorf("parseDest(%q): %v does not name the record", s, err)
		}
	}
}
