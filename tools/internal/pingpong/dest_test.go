package pingpong

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

var mappedGID = uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1} // ::ffff:10.99.0.1

// The bytes ibv_rc_pingpong (v44) writes for LID 0, QPN 0x11, PSN 0xabcdef
// and GID ::ffff:10.99.0.1, captured from its sprintf and gid_to_wire_gid on
// x86-64: 51 characters and the NUL, 52 bytes in all.
const cMessageHex = "303030303a3030303031313a6162636465663a3030303030303030303030303030303030303030666666663061363330303031" + "00"

func TestMarshalMatchesC(t *testing.T) {
	d := Dest{LID: 0, QPN: 0x11, PSN: 0xabcdef, GID: mappedGID}
	m := d.Marshal()
	if got := hex.EncodeToString(m[:]); got != cMessageHex {
		t.Errorf("marshal = %s\nwant      %s", got, cMessageHex)
	}
	if MsgLen != 52 {
		t.Errorf("MsgLen = %d, want 52", MsgLen)
	}
	if string(m[:MsgLen-1]) != "0000:000011:abcdef:00000000000000000000ffff0a630001" {
		t.Errorf("marshal text = %q", m[:MsgLen-1])
	}
}

func TestMarshalWidths(t *testing.T) {
	d := Dest{LID: 0xbeef, QPN: 0xffffff, PSN: 1, GID: uverbs.GID{0: 0xfe, 1: 0x80, 15: 0x42}}
	m := d.Marshal()
	want := "beef:ffffff:000001:fe800000000000000000000000000042\x00"
	if string(m[:]) != want {
		t.Errorf("marshal = %q, want %q", m[:], want)
	}
	// Values beyond 24 bits cannot be sent; they are cut, never allowed
	// to overrun the fixed-size message.
	d = Dest{QPN: 0x1000011, PSN: 0x1abcdef}
	if m := d.Marshal(); string(m[:19]) != "0000:000011:abcdef:" {
		t.Errorf("24-bit fields not masked: %q", m[:19])
	}
}

func TestParseCMessage(t *testing.T) {
	raw, err := hex.DecodeString(cMessageHex)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDest(raw)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Dest{LID: 0, QPN: 0x11, PSN: 0xabcdef, GID: mappedGID}); d != want {
		t.Errorf("ParseDest = %+v, want %+v", d, want)
	}
}

func TestParseRoundTrip(t *testing.T) {
	for _, d := range []Dest{
		{},
		{LID: 1, QPN: 0x12, PSN: 0x345678, GID: mappedGID},
		{LID: 0xffff, QPN: 0xffffff, PSN: 0xffffff, GID: uverbs.GID{0: 0xfe, 1: 0x80, 8: 0x50, 9: 0x54, 15: 0x56}},
	} {
		m := d.Marshal()
		got, err := ParseDest(m[:])
		if err != nil || got != d {
			t.Errorf("ParseDest(marshal(%+v)) = %+v, %v", d, got, err)
		}
	}
}

func TestParseSscanfWidths(t *testing.T) {
	// sscanf's %x takes any width: a peer printing narrower fields is read.
	d, err := ParseDest([]byte("1:2:3:00000000000000000000ffff0a630001\x00"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Dest{LID: 1, QPN: 2, PSN: 3, GID: mappedGID}); d != want {
		t.Errorf("ParseDest = %+v, want %+v", d, want)
	}
}

func TestParseRejects(t *testing.T) {
	for _, msg := range []string{
		"",
		"0000:000011:abcdef\x00",
		"0000:000011:abcdef:0000\x00",
		"zzzz:000011:abcdef:00000000000000000000ffff0a630001\x00",
		"10000:000011:abcdef:00000000000000000000ffff0a630001\x00",
		"0000:1000000:abcdef:00000000000000000000ffff0a630001\x00",
		"0000:000011:abcdef:00000000000000000000ffff0a63000g\x00",
		"0000:000011:abcdef:00000000000000000000ffff0a630001:00\x00",
	} {
		if d, err := ParseDest([]byte(msg)); err == nil {
			t.Errorf("ParseDest(%q) = %+v, want an error", msg, d)
		}
	}
}

func TestHasGlobalRoute(t *testing.T) {
	if (Dest{}).HasGlobalRoute() {
		t.Error("zero GID has a global route")
	}
	if !(Dest{GID: mappedGID}).HasGlobalRoute() {
		t.Error("::ffff:10.99.0.1 has no global route")
	}
	// Only the interface ID counts, as in the C tool.
	if (Dest{GID: uverbs.GID{0: 0xfe, 1: 0x80}}).HasGlobalRoute() {
		t.Error("fe80:: (zero interface ID) has a global route")
	}
}

func TestPrintAddress(t *testing.T) {
	var sb strings.Builder
	PrintAddress(&sb, "local address: ", Dest{LID: 0, QPN: 0x11, PSN: 0xabcdef, GID: mappedGID})
	PrintAddress(&sb, "remote address:", Dest{LID: 0x1f, QPN: 0x12, PSN: 0x5, GID: uverbs.GID{}})
	want := "  local address:  LID 0x0000, QPN 0x000011, PSN 0xabcdef, GID ::ffff:10.99.0.1\n" +
		"  remote address: LID 0x001f, QPN 0x000012, PSN 0x000005, GID ::\n"
	if sb.String() != want {
		t.Errorf("got\n%s\nwant\n%s", sb.String(), want)
	}
}
