package rxe

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs"
	"github.com/pureverbs/pureverbs/uverbs/abicheck"
)

// Every raw struct of this package, pinned to rdma_user_rxe.h and
// ib_user_verbs.h: gcc computes each size and offset from the header
// (package abicheck); no number is typed in here.
var pins = []abicheck.Pin{
	{C: "struct mminfo", Go: reflect.TypeFor[mmInfo]()},
	{C: "struct rxe_create_cq_resp", Go: reflect.TypeFor[createCQResp]()},
	{C: "struct rxe_resize_cq_resp", Go: reflect.TypeFor[resizeCQResp]()},
	{C: "struct rxe_create_qp_resp", Go: reflect.TypeFor[createQPResp]()},
	{C: "struct rxe_create_srq_resp", Go: reflect.TypeFor[createSRQResp]()},
	{C: "struct rxe_modify_srq_cmd", Go: reflect.TypeFor[modifySRQCmd]()},
	{C: "struct rxe_create_ah_resp", Go: reflect.TypeFor[createAHResp]()},
	{C: "struct rxe_global_route", Go: reflect.TypeFor[globalRoute]()},
	{C: "struct rxe_av", Go: reflect.TypeFor[addressVector]()},
	// The wr union is modelled by its largest member, ud; the others
	// overlay it (rdma(), atomic(), mw(), flush()).
	{C: "struct rxe_send_wr", Go: reflect.TypeFor[sendWR](), Rename: map[string]string{"wr": "wr.ud"}},
	{C: "struct rxe_send_wr", Member: "wr", Go: reflect.TypeFor[udWR](), Rename: map[string]string{
		"remoteQPN": "ud.remote_qpn", "remoteQKey": "ud.remote_qkey", "pkeyIndex": "ud.pkey_index",
		"ahNum": "ud.ah_num", "av": "ud.av"}},
	{C: "struct rxe_send_wr", Member: "wr.rdma", Go: reflect.TypeFor[rdmaWR]()},
	{C: "struct rxe_send_wr", Member: "wr.atomic", Go: reflect.TypeFor[atomicWR]()},
	{C: "struct rxe_send_wr", Member: "wr.mw", Go: reflect.TypeFor[mwWR]()},
	{C: "struct rxe_send_wr", Member: "wr.flush", Go: reflect.TypeFor[flushWR](), Rename: map[string]string{"typ": "type"}},
	{C: "struct rxe_sge", Go: reflect.TypeFor[SGE]()},
	{C: "struct rxe_dma_info", Go: reflect.TypeFor[dmaInfo]()},
	{C: "struct rxe_send_wqe", Go: reflect.TypeFor[sendWQE](), Rename: map[string]string{"wr.wr": "wr.ud"},
		Exprs: map[string]uintptr{"offsetof(struct rxe_send_wqe, dma.sge)": uintptr(sendWQESize)}},
	{C: "struct rxe_recv_wqe", Go: reflect.TypeFor[recvWQE](),
		Exprs: map[string]uintptr{"offsetof(struct rxe_recv_wqe, dma.sge)": uintptr(recvWQESize)}},
	{C: "struct ib_uverbs_wc", Go: reflect.TypeFor[uverbsWC]()},
}

func TestABIPinnedToHeaders(t *testing.T) {
	abicheck.Check(t, []string{"rdma/rdma_user_rxe.h", "rdma/ib_user_verbs.h"}, pins)
}

// The overlays view the wr union at its start and fit in it.
func TestABIOverlaysAndFlexArrays(t *testing.T) {
	var w sendWR
	base := uintptr(unsafe.Pointer(&w))
	for name, p := range map[string]unsafe.Pointer{
		"rdma": unsafe.Pointer(w.rdma()), "atomic": unsafe.Pointer(w.atomic()),
		"mw": unsafe.Pointer(w.mw()), "flush": unsafe.Pointer(w.flush()),
	} {
		if got := uintptr(p) - base; got != unsafe.Offsetof(w.wr) {
			t.Errorf("%s() overlay at %d, the union at %d", name, got, unsafe.Offsetof(w.wr))
		}
	}
	for _, o := range []uintptr{unsafe.Sizeof(rdmaWR{}), unsafe.Sizeof(atomicWR{}), unsafe.Sizeof(mwWR{}), unsafe.Sizeof(flushWR{})} {
		if o > unsafe.Sizeof(w.wr) {
			t.Errorf("an overlay of %d bytes is larger than the %d-byte union", o, unsafe.Sizeof(w.wr))
		}
	}
}

// No raw struct escapes the pins (a mapping only holds a mapped ring).
func TestABIEveryRawStructPinned(t *testing.T) {
	abicheck.CheckAllPinned(t, pins, "mapping")
}

// Rings are created only on rdma_rxe devices; any other driver is refused
// by name (the drivers as uverbs' discovery reports them from sysfs).
func TestCheckDriver(t *testing.T) {
	if err := checkDriver("create_cq", uverbs.Device{Name: "rxe0", Driver: "rxe", DriverID: uverbs.DriverRXE}); err != nil {
		t.Errorf("rxe device refused: %v", err)
	}
	for _, d := range []uverbs.Device{
		{Name: "mlx5_0", Driver: "mlx5_core"},
		{Name: "siw0", Driver: "siw", DriverID: uverbs.DriverSIW},
		{Name: "odd0"},
	} {
		for _, verb := range []string{"create_cq", "create_qp"} {
			err := checkDriver(verb, d)
			if !errors.Is(err, ErrNotSupported) || !errors.Is(err, uverbs.ErrNotSupported) {
				t.Errorf("%s on %s (%q) = %v, want ErrNotSupported", verb, d.Name, d.Driver, err)
				continue
			}
			name := d.Driver
			if name == "" {
				name = "unknown driver"
			}
			if msg := err.Error(); !strings.Contains(msg, verb) || !strings.Contains(msg, d.Name) || !strings.Contains(msg, name) {
				t.Errorf("%s on %s: error %q does not name the verb, device and driver", verb, d.Name, msg)
			}
		}
	}
}
