package vm

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type record struct {
	Name string
	Mode uint32
	Data string
}

// parseNewc reads an archive the way the kernel's initramfs unpacker does.
func parseNewc(t *testing.T, b []byte) []record {
	t.Helper()
	var recs []record
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off+110 > len(b) || string(b[off:off+6]) != "070701" {
			t.Fatalf("bad header at %d", off)
		}
		field := func(i int) int {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return int(v)
		}
		mode, size, namesize := field(1), field(6), field(11)
		name := string(b[off+110 : off+110+namesize-1])
		dataOff := align(off + 110 + namesize)
		data := string(b[dataOff : dataOff+size])
		off = align(dataOff + size)
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Errorf("%d bytes after the trailer", len(b)-off)
			}
			return recs
		}
		recs = append(recs, record{name, uint32(mode), data})
	}
}

func TestArchiveNewcLayout(t *testing.T) {
	a := NewArchive()
	a.Bytes("/rxevm/plan.json", []byte(`{"topology":"veth"}`), 0o644)
	a.Bytes("/init", []byte("\x7fELF12345"), 0o755)
	a.Symlink("/lib64/ld.so", "/lib/ld.so")
	var buf bytes.Buffer
	n, err := a.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if int(n) != buf.Len() || n%4 != 0 {
		t.Errorf("wrote %d (buffer %d), want a 4-byte multiple", n, buf.Len())
	}
	want := []record{
		{"init", modeRegular | 0o755, "\x7fELF12345"},
		{"lib64", modeDir | 0o755, ""},
		{"lib64/ld.so", modeSymlink | 0o777, "/lib/ld.so"},
		{"rxevm", modeDir | 0o755, ""},
		{"rxevm/plan.json", modeRegular | 0o644, `{"topology":"veth"}`},
	}
	if d := cmp.Diff(want, parseNewc(t, buf.Bytes())); d != "" {
		t.Errorf("archive (-want +got):\n%s", d)
	}
}
