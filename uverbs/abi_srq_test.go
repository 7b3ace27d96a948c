package uverbs

import (
	"reflect"
	"testing"
)

// The SRQ and resize commands join layouts, so that TestABILayout and
// TestABISizesFromHeaders check them against the headers too.
func init() {
	layouts = append(layouts,
		layout{"ib_uverbs_resize_cq", of[resizeCQCmd](), 16, map[string]uintptr{"Response": 0, "CQHandle": 8, "CQE": 12}},
		layout{"ib_uverbs_resize_cq_resp", of[resizeCQResp](), 8, map[string]uintptr{"CQE": 0}},
		layout{"ib_uverbs_create_srq", of[createSRQCmd](), 32, map[string]uintptr{
			"Response": 0, "UserHandle": 8, "PDHandle": 16, "MaxWR": 20, "MaxSGE": 24, "SRQLimit": 28}},
		layout{"ib_uverbs_create_srq_resp", of[createSRQResp](), 16, map[string]uintptr{
			"SRQHandle": 0, "MaxWR": 4, "MaxSGE": 8, "SRQN": 12}},
		layout{"ib_uverbs_modify_srq", of[modifySRQCmd](), 16, map[string]uintptr{
			"SRQHandle": 0, "AttrMask": 4, "MaxWR": 8, "SRQLimit": 12}},
		layout{"ib_uverbs_query_srq", of[querySRQCmd](), 16, map[string]uintptr{"Response": 0, "SRQHandle": 8}},
		layout{"ib_uverbs_query_srq_resp", of[querySRQResp](), 16, map[string]uintptr{"MaxWR": 0, "MaxSGE": 4, "SRQLimit": 8}},
		layout{"ib_uverbs_destroy_srq", of[destroySRQCmd](), 16, map[string]uintptr{"Response": 0, "SRQHandle": 8}},
		layout{"ib_uverbs_destroy_srq_resp", of[destroySRQResp](), 4, nil},
	)
}

func TestSRQResponseFieldFirst(t *testing.T) {
	ptr := reflect.TypeFor[ptr64]()
	for _, typ := range []reflect.Type{of[resizeCQCmd](), of[createSRQCmd](), of[querySRQCmd](), of[destroySRQCmd]()} {
		if f := typ.Field(0); f.Name != "Response" || f.Type != ptr || f.Offset != 0 {
			t.Errorf("%s starts with %s %s at %d, want Response ptr64 at 0", typ, f.Name, f.Type, f.Offset)
		}
	}
}
