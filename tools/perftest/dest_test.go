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

// The binary record of -R is perftest's struct pingpong_dest with
// big-endian integers at its offsets, and reads back as written.
func TestBinaryDest(t *testing.T) {
	d := dest{lid: 0, outReads: 16, qpn: 0x123456, psn: 0xabcdef, rkey: 0x1234, vaddr: 0x7f0011223344,
		gid: uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 15: 2}}
	var b [cmDestLen]byte
	for i := range b {
		b[i] = 0xee // the marshal clears padding
	}
	d.marshalBinary(b[:], 1)
	want := [cmDestLen]byte{
		0, 0, 0, 0, 0, 0, 0, 16, 0, 0x12, 0x34, 0x56, 0, 0xab, 0xcd, 0xef, 0, 0, 0x12, 0x34, 0, 0, 0, 0,
		0, 0, 0x7f, 0, 0x11, 0x22, 0x33, 0x44,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 99, 0, 2,
		0, 0, 0, 0, 0, 0, 0, 1,
	}
	if b != want {
		t.Fatalf("got  % x\nwant % x", b, want)
	}
	if got := parseBinaryDest(b[:]); got != d {
		t.Fatalf("read back %+v, want %+v", got, d)
	}
}
