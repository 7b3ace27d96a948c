package uverbs

import (
	"reflect"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs/abicheck"
)

// The memory window and rereg_mr commands, pinned to the header like the
// rest (TestABIPinnedToHeaders).
func init() {
	pins = append(pins,
		abicheck.Pin{C: "struct ib_uverbs_alloc_mw", Go: of[allocMWCmd]()},
		abicheck.Pin{C: "struct ib_uverbs_alloc_mw_resp", Go: of[allocMWResp]()},
		abicheck.Pin{C: "struct ib_uverbs_dealloc_mw", Go: of[deallocMWCmd]()},
		abicheck.Pin{C: "struct ib_uverbs_rereg_mr", Go: of[reregMRCmd]()},
		abicheck.Pin{C: "struct ib_uverbs_rereg_mr_resp", Go: of[reregMRResp]()},
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
