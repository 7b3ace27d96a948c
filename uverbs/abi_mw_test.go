package uverbs

import (
	"reflect"
	"testing"
)

// The memory window and rereg_mr commands, pinned like the rest (the table
// is also checked against the headers by TestABISizesFromHeaders).
func init() {
	layouts = append(layouts,
		layout{"ib_uverbs_alloc_mw", of[allocMWCmd](), 16, map[string]uintptr{"Response": 0, "PDHandle": 8, "MWType": 12, "Reserved": 13}},
		layout{"ib_uverbs_alloc_mw_resp", of[allocMWResp](), 8, map[string]uintptr{"MWHandle": 0, "RKey": 4}},
		layout{"ib_uverbs_dealloc_mw", of[deallocMWCmd](), 4, map[string]uintptr{"MWHandle": 0}},
		layout{"ib_uverbs_rereg_mr", of[reregMRCmd](), 48, map[string]uintptr{
			"Response": 0, "MRHandle": 8, "Flags": 12, "Start": 16, "Length": 24, "HCAVA": 32, "PDHandle": 40, "AccessFlags": 44}},
		layout{"ib_uverbs_rereg_mr_resp", of[reregMRResp](), 8, map[string]uintptr{"LKey": 0, "RKey": 4}},
	)
}

func TestMWCommandsResponseFirst(t *testing.T) {
	ptr := reflect.TypeFor[ptr64]()
	for _, typ := range []reflect.Type{of[allocMWCmd](), of[reregMRCmd]()} {
		if f := typ.Field(0); f.Name != "Response" || f.Type != ptr || f.Offset != 0 {
			t.Errorf("%s starts with %s %s at %d, want Response ptr64 at 0", typ, f.Name, f.Type, f.Offset)
		}
	}
}

func TestNextRKey(t *testing.T) {
	for _, c := range []struct{ in, want uint32 }{{0x1200, 0x1201}, {0x12ff, 0x1200}, {0xffffff7f, 0xffffff80}} {
		if got := NextRKey(c.in); got != c.want {
			t.Errorf("NextRKey(%#x) = %#x, want %#x", c.in, got, c.want)
		}
	}
}
