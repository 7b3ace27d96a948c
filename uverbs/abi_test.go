package uverbs

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/pureverbs/pureverbs/uverbs/abicheck"
)

func of[T any]() reflect.Type { return reflect.TypeFor[T]() }

// pins ties every raw struct of the write and ioctl paths to its C struct
// in ib_user_verbs.h, rdma_user_ioctl_cmds.h and ib_user_ioctl_verbs.h:
// gcc derives each size and field offset from the header (package
// abicheck), so no number is typed in here. The flexible send_wr array of
// struct ib_uverbs_post_send is not part of postSendCmd; sizeofSendWR is
// checked against struct ib_uverbs_send_wr.
var pins = []abicheck.Pin{
	{C: "struct ib_uverbs_sge", Go: of[SGE]()},
	{C: "struct ib_uverbs_cmd_hdr", Go: of[cmdHdr]()},
	{C: "struct ib_uverbs_ex_cmd_hdr", Go: of[exCmdHdr]()},
	{C: "struct ib_uverbs_get_context", Go: of[getContextCmd]()},
	{C: "struct ib_uverbs_get_context_resp", Go: of[getContextResp]()},
	{C: "struct ib_uverbs_ex_query_device", Go: of[exQueryDeviceCmd]()},
	{C: "struct ib_uverbs_query_device_resp", Go: of[queryDeviceResp]()},
	{C: "struct ib_uverbs_odp_caps", Go: of[odpCaps](), Rename: odpPerTransport},
	{C: "struct ib_uverbs_rss_caps", Go: of[rssCaps]()},
	{C: "struct ib_uverbs_tm_caps", Go: of[tmCaps]()},
	{C: "struct ib_uverbs_cq_moderation_caps", Go: of[cqModerationCaps]()},
	{C: "struct ib_uverbs_ex_query_device_resp", Go: of[exQueryDeviceResp](), Rename: odpPerTransport},
	{C: "struct ib_uverbs_query_port", Go: of[queryPortCmd]()},
	{C: "struct ib_uverbs_query_port_resp", Go: of[queryPortResp]()},
	{C: "struct ib_uverbs_alloc_pd", Go: of[allocPDCmd]()},
	{C: "struct ib_uverbs_alloc_pd_resp", Go: of[allocPDResp]()},
	{C: "struct ib_uverbs_dealloc_pd", Go: of[deallocPDCmd]()},
	{C: "struct ib_uverbs_reg_mr", Go: of[regMRCmd]()},
	{C: "struct ib_uverbs_reg_mr_resp", Go: of[regMRResp]()},
	{C: "struct ib_uverbs_dereg_mr", Go: of[deregMRCmd]()},
	{C: "struct ib_uverbs_create_comp_channel", Go: of[createCompChannelCmd]()},
	{C: "struct ib_uverbs_create_comp_channel_resp", Go: of[createCompChannelResp]()},
	{C: "struct ib_uverbs_create_cq", Go: of[createCQCmd]()},
	{C: "struct ib_uverbs_create_cq_resp", Go: of[createCQResp]()},
	{C: "struct ib_uverbs_resize_cq", Go: of[resizeCQCmd](), Exprs: map[string]uintptr{"IB_USER_VERBS_CMD_RESIZE_CQ": cmdResizeCQ}},
	{C: "struct ib_uverbs_resize_cq_resp", Go: of[resizeCQResp]()},
	{C: "struct ib_uverbs_req_notify_cq", Go: of[reqNotifyCQCmd]()},
	{C: "struct ib_uverbs_destroy_cq", Go: of[destroyCQCmd]()},
	{C: "struct ib_uverbs_destroy_cq_resp", Go: of[destroyCQResp]()},
	{C: "struct ib_uverbs_comp_event_desc", Go: of[compEventDesc]()},
	{C: "struct ib_uverbs_async_event_desc", Go: of[asyncEventDesc]()},
	{C: "struct ib_uverbs_create_qp", Go: of[createQPCmd]()},
	{C: "struct ib_uverbs_create_qp_resp", Go: of[createQPResp]()},
	{C: "struct ib_uverbs_qp_dest", Go: of[qpDest]()},
	{C: "struct ib_uverbs_modify_qp", Go: of[modifyQPCmd]()},
	{C: "struct ib_uverbs_query_qp", Go: of[queryQPCmd]()},
	{C: "struct ib_uverbs_query_qp_resp", Go: of[queryQPResp]()},
	{C: "struct ib_uverbs_destroy_qp", Go: of[destroyQPCmd]()},
	{C: "struct ib_uverbs_destroy_qp_resp", Go: of[destroyQPResp]()},
	{C: "struct ib_uverbs_post_send", Go: of[postSendCmd]()},
	{C: "struct ib_uverbs_post_send_resp", Go: of[postSendResp]()},
	{C: "struct ib_uverbs_ioctl_hdr", Go: of[ioctlHdr]()},
	{C: "struct ib_uverbs_attr", Go: of[ioctlAttr]()},
	{C: "struct ib_uverbs_gid_entry", Go: of[gidEntry]()},
	{C: "struct ib_uverbs_send_wr", Exprs: map[string]uintptr{"sizeof(struct ib_uverbs_send_wr)": sizeofSendWR}},
}

// odpPerTransport names the members of struct ib_uverbs_odp_caps's
// per_transport_caps, which odpCaps flattens.
var odpPerTransport = map[string]string{
	"RCODPCaps": "per_transport_caps.rc_odp_caps", "UCODPCaps": "per_transport_caps.uc_odp_caps",
	"UDODPCaps": "per_transport_caps.ud_odp_caps",
}

// uapiHeaders are the headers the pins compile against.
var uapiHeaders = []string{"rdma/ib_user_verbs.h", "rdma/rdma_user_ioctl_cmds.h", "rdma/ib_user_ioctl_verbs.h", "rdma/ib_user_ioctl_cmds.h"}

func TestABIPinnedToHeaders(t *testing.T) {
	abicheck.Check(t, uapiHeaders, pins)
}

// Every request that has a response must start with the ptr64 response
// field: buildWrite points it at the response frame.
func TestResponseFieldFirst(t *testing.T) {
	ptr := reflect.TypeFor[ptr64]()
	for _, typ := range []reflect.Type{
		of[getContextCmd](), of[queryPortCmd](), of[allocPDCmd](), of[regMRCmd](), of[createCompChannelCmd](),
		of[createCQCmd](), of[resizeCQCmd](), of[destroyCQCmd](), of[createQPCmd](), of[queryQPCmd](), of[destroyQPCmd](), of[postSendCmd](),
	} {
		if f := typ.Field(0); f.Name != "Response" || f.Type != ptr || f.Offset != 0 {
			t.Errorf("%s starts with %s %s at %d, want Response ptr64 at 0", typ, f.Name, f.Type, f.Offset)
		}
	}
}

func TestConstants(t *testing.T) {
	// _IOWR(RDMA_IOCTL_MAGIC=0x1b, 1, struct ib_uverbs_ioctl_hdr): dir 3<<30, size<<16, type<<8, nr.
	if want := uintptr(3<<30 | unsafe.Sizeof(ioctlHdr{})<<16 | 0x1b<<8 | 1); rdmaVerbsIoctl != want {
		t.Errorf("rdmaVerbsIoctl = %#x, want %#x", rdmaVerbsIoctl, want)
	}
	// sizeofSendWR itself is checked against the header by
	// TestABISizesFromHeaders.
	if doorbellWQESize < sizeofSendWR {
		t.Errorf("doorbell wqe_size %d is below the kernel's minimum %d", doorbellWQESize, sizeofSendWR)
	}
}

// The driver data of a frame must follow the core request or response
// directly, as the kernel expects it.
func TestFrameContiguity(t *testing.T) {
	check := func(name string, core, coreSize, drv uintptr) {
		t.Helper()
		if drv != core+coreSize {
			t.Errorf("%s: driver data at %d, want %d", name, drv, core+coreSize)
		}
	}
	var f1 writeFrame[createCQCmd]
	check("create_cq request", unsafe.Offsetof(f1.req), unsafe.Sizeof(f1.req), unsafe.Offsetof(f1.drv))
	var f2 writeFrame[deallocPDCmd]
	check("dealloc_pd request", unsafe.Offsetof(f2.req), unsafe.Sizeof(f2.req), unsafe.Offsetof(f2.drv))
	var f3 exWriteFrame[exQueryDeviceCmd]
	check("query_device_ex request", unsafe.Offsetof(f3.req), unsafe.Sizeof(f3.req), unsafe.Offsetof(f3.drv))
	if unsafe.Offsetof(f3.req) != 24 {
		t.Errorf("extended request at %d, want 24 (after both headers)", unsafe.Offsetof(f3.req))
	}
	var r1 respFrame[allocPDResp]
	check("alloc_pd response", 0, unsafe.Sizeof(r1.resp), unsafe.Offsetof(r1.drv))
	var r2 respFrame[regMRResp]
	check("reg_mr response", 0, unsafe.Sizeof(r2.resp), unsafe.Offsetof(r2.drv))
	var r3 respFrame[createQPResp]
	check("create_qp response", 0, unsafe.Sizeof(r3.resp), unsafe.Offsetof(r3.drv))
}

// No raw struct escapes the pins. The write frames are a header and a
// pinned request back to back (TestFrameContiguity).
func TestABIEveryRawStructPinned(t *testing.T) {
	abicheck.CheckAllPinned(t, pins, "writeFrame", "exWriteFrame")
}
