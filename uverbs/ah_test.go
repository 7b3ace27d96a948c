package uverbs

import (
	"testing"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs/abicheck"
)

// ahAttrGRH names the members of struct ib_uverbs_ah_attr's grh, which
// AHAttrABI flattens, wherever an address vector is nested.
var ahAttrGRH = map[string]string{
	"dgid": "grh.dgid", "flowLabel": "grh.flow_label", "sgidIndex": "grh.sgid_index",
	"hopLimit": "grh.hop_limit", "trafficClass": "grh.traffic_class", "grhReserved": "grh.reserved",
}

// The address handle and multicast structs, pinned to the header like the
// rest (TestABIPinnedToHeaders).
func init() {
	pins = append(pins,
		abicheck.Pin{C: "struct ib_uverbs_ah_attr", Go: of[AHAttrABI](), Rename: ahAttrGRH},
		abicheck.Pin{C: "struct ib_uverbs_qp_attr", Go: of[QPAttrABI](), Rename: ahAttrGRH},
		abicheck.Pin{C: "struct ib_uverbs_create_ah", Go: of[createAHCmd](), Rename: ahAttrGRH},
		abicheck.Pin{C: "struct ib_uverbs_create_ah_resp", Go: of[createAHResp]()},
		abicheck.Pin{C: "struct ib_uverbs_destroy_ah", Go: of[destroyAHCmd]()},
		abicheck.Pin{C: "struct ib_uverbs_attach_mcast", Go: of[mcastCmd]()},
		abicheck.Pin{C: "struct ib_uverbs_detach_mcast", Go: of[mcastCmd]()},
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
