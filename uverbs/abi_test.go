package uverbs

import (
	"reflect"
	"testing"
	"unsafe"
)

// layout is a struct's expected size and field offsets.
type layout struct {
	name    string
	typ     reflect.Type
	size    uintptr
	offsets map[string]uintptr
}

func of[T any]() reflect.Type { return reflect.TypeFor[T]() }

// The sizes and offsets below were computed with gcc from the Debian 12
// headers /usr/include/rdma/ib_user_verbs.h, ib_user_ioctl_verbs.h and
// rdma_user_ioctl_cmds.h (x86_64; the structs are laid out identically on
// arm64, being padded for 32/64-bit compatibility).
var layouts = []layout{
	{"ib_uverbs_sge", of[SGE](), 16, map[string]uintptr{"Addr": 0, "Length": 8, "LKey": 12}},
	{"ib_uverbs_cmd_hdr", of[cmdHdr](), 8, map[string]uintptr{"Command": 0, "InWords": 4, "OutWords": 6}},
	{"ib_uverbs_ex_cmd_hdr", of[exCmdHdr](), 16, map[string]uintptr{"Response": 0, "ProviderInWords": 8, "ProviderOutWords": 10, "CmdHdrReserved": 12}},
	{"ib_uverbs_get_context", of[getContextCmd](), 8, map[string]uintptr{"Response": 0}},
	{"ib_uverbs_get_context_resp", of[getContextResp](), 8, map[string]uintptr{"AsyncFD": 0, "NumCompVectors": 4}},
	{"ib_uverbs_ex_query_device", of[exQueryDeviceCmd](), 8, map[string]uintptr{"CompMask": 0, "Reserved": 4}},
	{"ib_uverbs_query_device_resp", of[queryDeviceResp](), 176, map[string]uintptr{
		"FWVer": 0, "NodeGUID": 8, "VendorID": 40, "MaxQP": 52, "MaxQPWR": 56, "MaxCQE": 76,
		"MaxSRQSGE": 164, "MaxPKeys": 168, "LocalCAAckDelay": 170, "PhysPortCnt": 171}},
	{"ib_uverbs_odp_caps", of[odpCaps](), 24, nil},
	{"ib_uverbs_rss_caps", of[rssCaps](), 16, nil},
	{"ib_uverbs_tm_caps", of[tmCaps](), 24, nil},
	{"ib_uverbs_cq_moderation_caps", of[cqModerationCaps](), 8, nil},
	{"ib_uverbs_ex_query_device_resp", of[exQueryDeviceResp](), 304, map[string]uintptr{
		"CompMask": 176, "ResponseLength": 180, "ODPCaps": 184, "TimestampMask": 208, "HCACoreClock": 216,
		"DeviceCapFlagsEx": 224, "RSSCaps": 232, "MaxWQTypeRQ": 248, "RawPacketCaps": 252, "TMCaps": 256,
		"CQModerationCaps": 280, "MaxDMSize": 288, "XRCODPCaps": 296}},
	{"ib_uverbs_query_port", of[queryPortCmd](), 16, map[string]uintptr{"Response": 0, "PortNum": 8}},
	{"ib_uverbs_query_port_resp", of[queryPortResp](), 40, map[string]uintptr{
		"GIDTblLen": 16, "PKeyTblLen": 20, "LID": 22, "SMLID": 24, "State": 26, "ActiveMTU": 28,
		"ActiveWidth": 34, "PhysState": 36, "LinkLayer": 37, "Flags": 38}},
	{"ib_uverbs_alloc_pd", of[allocPDCmd](), 8, nil},
	{"ib_uverbs_alloc_pd_resp", of[allocPDResp](), 4, nil},
	{"ib_uverbs_dealloc_pd", of[deallocPDCmd](), 4, nil},
	{"ib_uverbs_reg_mr", of[regMRCmd](), 40, map[string]uintptr{"Start": 8, "Length": 16, "HCAVA": 24, "PDHandle": 32, "AccessFlags": 36}},
	{"ib_uverbs_reg_mr_resp", of[regMRResp](), 12, map[string]uintptr{"LKey": 4, "RKey": 8}},
	{"ib_uverbs_dereg_mr", of[deregMRCmd](), 4, nil},
	{"ib_uverbs_create_comp_channel", of[createCompChannelCmd](), 8, nil},
	{"ib_uverbs_create_comp_channel_resp", of[createCompChannelResp](), 4, nil},
	{"ib_uverbs_create_cq", of[createCQCmd](), 32, map[string]uintptr{"UserHandle": 8, "CQE": 16, "CompVector": 20, "CompChannel": 24, "Reserved": 28}},
	{"ib_uverbs_create_cq_resp", of[createCQResp](), 8, map[string]uintptr{"CQE": 4}},
	{"ib_uverbs_req_notify_cq", of[reqNotifyCQCmd](), 8, map[string]uintptr{"SolicitedOnly": 4}},
	{"ib_uverbs_destroy_cq", of[destroyCQCmd](), 16, map[string]uintptr{"CQHandle": 8}},
	{"ib_uverbs_destroy_cq_resp", of[destroyCQResp](), 8, map[string]uintptr{"AsyncEventsReported": 4}},
	{"ib_uverbs_comp_event_desc", of[compEventDesc](), 8, nil},
	{"ib_uverbs_async_event_desc", of[asyncEventDesc](), 16, map[string]uintptr{"EventType": 8}},
	{"ib_uverbs_create_qp", of[createQPCmd](), 56, map[string]uintptr{
		"UserHandle": 8, "PDHandle": 16, "SendCQHandle": 20, "RecvCQHandle": 24, "SRQHandle": 28,
		"MaxSendWR": 32, "MaxInlineData": 48, "SQSigAll": 52, "QPType": 53, "IsSRQ": 54, "Reserved": 55}},
	{"ib_uverbs_create_qp_resp", of[createQPResp](), 32, map[string]uintptr{"QPN": 4, "MaxInlineData": 24, "Reserved": 28}},
	{"ib_uverbs_qp_dest", of[qpDest](), 32, map[string]uintptr{
		"FlowLabel": 16, "DLID": 20, "SGIDIndex": 24, "HopLimit": 25, "TrafficClass": 26, "SL": 27,
		"SrcPathBits": 28, "StaticRate": 29, "IsGlobal": 30, "PortNum": 31}},
	{"ib_uverbs_modify_qp", of[modifyQPCmd](), 112, map[string]uintptr{
		"AltDest": 32, "QPHandle": 64, "AttrMask": 68, "QKey": 72, "RQPSN": 76, "SQPSN": 80,
		"DestQPNum": 84, "QPAccessFlags": 88, "PKeyIndex": 92, "AltPKeyIndex": 94, "QPState": 96,
		"CurQPState": 97, "PathMTU": 98, "PathMigState": 99, "EnSQDAsyncNotify": 100, "MaxRdAtomic": 101,
		"MaxDestRdAtomic": 102, "MinRNRTimer": 103, "PortNum": 104, "Timeout": 105, "RetryCnt": 106,
		"RNRRetry": 107, "AltPortNum": 108, "AltTimeout": 109, "Reserved": 110}},
	{"ib_uverbs_query_qp", of[queryQPCmd](), 16, map[string]uintptr{"QPHandle": 8, "AttrMask": 12}},
	{"ib_uverbs_query_qp_resp", of[queryQPResp](), 128, map[string]uintptr{
		"AltDest": 32, "MaxSendWR": 64, "MaxInlineData": 80, "QKey": 84, "RQPSN": 88, "SQPSN": 92,
		"DestQPNum": 96, "QPAccessFlags": 100, "PKeyIndex": 104, "QPState": 108, "CurQPState": 109,
		"PathMTU": 110, "PathMigState": 111, "SQDraining": 112, "MaxRdAtomic": 113, "MaxDestRdAtomic": 114,
		"MinRNRTimer": 115, "PortNum": 116, "Timeout": 117, "RetryCnt": 118, "RNRRetry": 119,
		"AltPortNum": 120, "AltTimeout": 121, "SQSigAll": 122, "Reserved": 123}},
	{"ib_uverbs_destroy_qp", of[destroyQPCmd](), 16, nil},
	{"ib_uverbs_destroy_qp_resp", of[destroyQPResp](), 4, nil},
	// struct ib_uverbs_post_send is 24 bytes plus its flexible send_wr array.
	{"ib_uverbs_post_send", of[postSendCmd](), 24, map[string]uintptr{"QPHandle": 8, "WRCount": 12, "SGECount": 16, "WQESize": 20}},
	{"ib_uverbs_post_send_resp", of[postSendResp](), 4, nil},
	{"ib_uverbs_ioctl_hdr", of[ioctlHdr](), 24, map[string]uintptr{
		"Length": 0, "ObjectID": 2, "MethodID": 4, "NumAttrs": 6, "Reserved1": 8, "DriverID": 16, "Reserved2": 20}},
	{"ib_uverbs_attr", of[ioctlAttr](), 16, map[string]uintptr{"AttrID": 0, "Len": 2, "Flags": 4, "AttrData": 6, "Data": 8}},
	{"ib_uverbs_gid_entry", of[gidEntry](), 32, map[string]uintptr{"GIDIndex": 16, "PortNum": 20, "GIDType": 24, "NetdevIfindex": 28}},
}

func TestABILayout(t *testing.T) {
	for _, l := range layouts {
		if got := l.typ.Size(); got != l.size {
			t.Errorf("struct %s: Go %s is %d bytes, C is %d", l.name, l.typ, got, l.size)
		}
		for name, want := range l.offsets {
			f, ok := l.typ.FieldByName(name)
			if !ok {
				t.Errorf("struct %s: Go %s has no field %s", l.name, l.typ, name)
				continue
			}
			if f.Offset != want {
				t.Errorf("struct %s: %s at offset %d, C has %d", l.name, name, f.Offset, want)
			}
		}
	}
}

// Every request that has a response must start with the ptr64 response
// field: buildWrite points it at the response frame.
func TestResponseFieldFirst(t *testing.T) {
	ptr := reflect.TypeFor[ptr64]()
	for _, typ := range []reflect.Type{
		of[getContextCmd](), of[queryPortCmd](), of[allocPDCmd](), of[regMRCmd](), of[createCompChannelCmd](),
		of[createCQCmd](), of[destroyCQCmd](), of[createQPCmd](), of[queryQPCmd](), of[destroyQPCmd](), of[postSendCmd](),
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
	// From gcc over <rdma/ib_user_verbs.h>: sizeof(struct ib_uverbs_send_wr).
	if sizeofSendWR != 56 {
		t.Errorf("sizeofSendWR = %d", sizeofSendWR)
	}
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
