package uverbs

import (
	"testing"
	"unsafe"
)

// The address handle and multicast structs join the table that
// TestABILayout and TestABISizesFromHeaders check against the headers
// (sizes and offsets computed with gcc from Debian 12's
// <rdma/ib_user_verbs.h>).
func init() {
	layouts = append(layouts,
		layout{"ib_uverbs_ah_attr", of[ahAttrABI](), 32, map[string]uintptr{
			"FlowLabel": 16, "SGIDIndex": 20, "HopLimit": 21, "TrafficClass": 22, "DLID": 24, "SL": 26,
			"SrcPathBits": 27, "StaticRate": 28, "IsGlobal": 29, "PortNum": 30, "Reserved": 31}},
		layout{"ib_uverbs_create_ah", of[createAHCmd](), 56, map[string]uintptr{
			"Response": 0, "UserHandle": 8, "PDHandle": 16, "Reserved": 20, "Attr": 24}},
		layout{"ib_uverbs_create_ah_resp", of[createAHResp](), 4, nil},
		layout{"ib_uverbs_destroy_ah", of[destroyAHCmd](), 4, nil},
		layout{"ib_uverbs_attach_mcast", of[mcastCmd](), 24, map[string]uintptr{"QPHandle": 16, "MLID": 20, "Reserved": 22}},
		layout{"ib_uverbs_detach_mcast", of[mcastCmd](), 24, map[string]uintptr{"QPHandle": 16, "MLID": 20}},
	)
}

// The driver's create_ah response (rxe's ah_num) follows the 4-byte core
// response directly, where the kernel writes it; in_words/out_words count
// the 8 bytes asked for.
func TestCreateAHFrame(t *testing.T) {
	var r respFrame[createAHResp]
	if off := unsafe.Offsetof(r.drv); off != 4 {
		t.Fatalf("create_ah driver response at %d, want 4", off)
	}
	var f writeFrame[createAHCmd]
	f.req = createAHCmd{Response: r.ptr()}
	n := buildWrite(&f, cmdCreateAH, &r, nil, 8)
	if n != 8+56 || f.hdr.InWords != (8+56)/4 || f.hdr.OutWords != (4+8)/4 || f.hdr.Command != 5 {
		t.Fatalf("create_ah frame: %d bytes, header %+v", n, f.hdr)
	}
}

func TestCreateAHNeedsGlobalRoute(t *testing.T) {
	pd := &PD{ctx: &Context{}} // refused before any command
	if _, err := pd.CreateAH(AHAttr{PortNum: 1}, nil); err == nil {
		t.Fatal("create_ah without a GRH accepted")
	}
	a := GlobalAH(GID{15: 1}, 1, 1)
	if !a.IsGlobal || a.PortNum != 1 || a.GRH.SGIDIndex != 1 || a.GRH.HopLimit != 1 || a.GRH.DGID[15] != 1 {
		t.Fatalf("GlobalAH = %+v", a)
	}
}
