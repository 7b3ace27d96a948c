package ucma

import (
	"reflect"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs/abicheck"
)

func of[T any]() reflect.Type { return reflect.TypeFor[T]() }

// ahAttrGRH names the members of struct ib_uverbs_ah_attr's grh, which
// uverbs.AHAttrABI flattens, wherever an address vector is nested.
var ahAttrGRH = map[string]string{
	"dgid": "grh.dgid", "flowLabel": "grh.flow_label", "sgidIndex": "grh.sgid_index",
	"hopLimit": "grh.hop_limit", "trafficClass": "grh.traffic_class", "grhReserved": "grh.reserved",
}

// uapiHeaders are the headers the pins compile against.
var uapiHeaders = []string{"rdma/ib_user_verbs.h", "rdma/rdma_user_cm.h", "rdma/ib_user_sa.h", "linux/in.h"}

// pins ties every raw struct and constant of the RDMA CM ABI to
// <rdma/rdma_user_cm.h>: gcc derives each size and field offset from the
// header (package abicheck), so no number is typed in here.
var pins = []abicheck.Pin{
	{C: "struct rdma_ucm_create_id", Go: of[ucmaCreateID]()},
	{C: "struct rdma_ucm_create_id_resp", Go: of[ucmaCreateIDResp]()},
	{C: "struct rdma_ucm_destroy_id", Go: of[ucmaDestroyID]()},
	{C: "struct rdma_ucm_destroy_id_resp", Go: of[ucmaDestroyIDResp]()},
	{C: "struct rdma_ucm_bind", Go: of[ucmaBind]()},
	{C: "struct rdma_ucm_resolve_addr", Go: of[ucmaResolveAddr]()},
	{C: "struct rdma_ucm_resolve_route", Go: of[ucmaResolveRoute]()},
	{C: "struct rdma_ucm_query", Go: of[ucmaQuery]()},
	{C: "struct rdma_ucm_query_addr_resp", Go: of[ucmaQueryAddrResp]()},
	{C: "struct ib_path_rec_data", Go: of[pathRecData]()},
	{C: "struct rdma_ucm_query_path_resp", Go: of[queryPathRespHdr](), Exprs: map[string]uintptr{
		"offsetof(struct rdma_ucm_query_path_resp, path_data)": reflect.TypeFor[ucmaQueryPathResp]().Field(1).Offset,
	}},
	{C: "struct rdma_ucm_conn_param", Go: of[ucmaConnParam]()},
	{C: "struct rdma_ucm_ud_param", Go: of[ucmaUDParam](), Rename: ahAttrGRH},
	{C: "struct rdma_ucm_ece", Go: of[ucmaECE]()},
	{C: "struct rdma_ucm_connect", Go: of[ucmaConnect]()},
	{C: "struct rdma_ucm_listen", Go: of[ucmaListen]()},
	{C: "struct rdma_ucm_accept", Go: of[ucmaAccept]()},
	{C: "struct rdma_ucm_reject", Go: of[ucmaReject]()},
	{C: "struct rdma_ucm_disconnect", Go: of[ucmaDisconnect]()},
	{C: "struct rdma_ucm_init_qp_attr", Go: of[ucmaInitQPAttr]()},
	{C: "struct rdma_ucm_notify", Go: of[ucmaNotify]()},
	{C: "struct rdma_ucm_join_mcast", Go: of[ucmaJoinMcast]()},
	{C: "struct rdma_ucm_get_event", Go: of[ucmaGetEvent]()},
	{C: "struct rdma_ucm_event_resp", Go: of[ucmaEventResp]()},
	{C: "struct rdma_ucm_set_option", Go: of[ucmaSetOption]()},
	{C: "struct rdma_ucm_migrate_id", Go: of[ucmaMigrateID]()},
	{C: "struct rdma_ucm_migrate_resp", Go: of[ucmaMigrateResp]()},
	// The header's struct, with the header's constants.
	{C: "struct rdma_ucm_cmd_hdr", Go: of[ucmaCmdHdr](), Exprs: map[string]uintptr{
		"RDMA_USER_CM_ABI_VERSION": ucmaABIVersion, "RDMA_MAX_PRIVATE_DATA": ucmaMaxPrivateData,
		"RDMA_USER_CM_CMD_CREATE_ID": ucmaCmdCreateID, "RDMA_USER_CM_CMD_DESTROY_ID": ucmaCmdDestroyID,
		"RDMA_USER_CM_CMD_BIND_IP": ucmaCmdBindIP, "RDMA_USER_CM_CMD_RESOLVE_IP": ucmaCmdResolveIP,
		"RDMA_USER_CM_CMD_RESOLVE_ROUTE": ucmaCmdResolveRoute, "RDMA_USER_CM_CMD_QUERY_ROUTE": ucmaCmdQueryRoute,
		"RDMA_USER_CM_CMD_CONNECT": ucmaCmdConnect, "RDMA_USER_CM_CMD_LISTEN": ucmaCmdListen,
		"RDMA_USER_CM_CMD_ACCEPT": ucmaCmdAccept, "RDMA_USER_CM_CMD_REJECT": ucmaCmdReject,
		"RDMA_USER_CM_CMD_DISCONNECT": ucmaCmdDisconnect, "RDMA_USER_CM_CMD_INIT_QP_ATTR": ucmaCmdInitQPAttr,
		"RDMA_USER_CM_CMD_GET_EVENT": ucmaCmdGetEvent, "RDMA_USER_CM_CMD_GET_OPTION": ucmaCmdGetOption,
		"RDMA_USER_CM_CMD_SET_OPTION": ucmaCmdSetOption, "RDMA_USER_CM_CMD_NOTIFY": ucmaCmdNotify,
		"RDMA_USER_CM_CMD_JOIN_IP_MCAST": ucmaCmdJoinIPMcast, "RDMA_USER_CM_CMD_LEAVE_MCAST": ucmaCmdLeaveMcast,
		"RDMA_USER_CM_CMD_MIGRATE_ID": ucmaCmdMigrateID, "RDMA_USER_CM_CMD_QUERY": ucmaCmdQuery,
		"RDMA_USER_CM_CMD_BIND": ucmaCmdBind, "RDMA_USER_CM_CMD_RESOLVE_ADDR": ucmaCmdResolveAddr,
		"RDMA_USER_CM_CMD_JOIN_MCAST": ucmaCmdJoinMcast,
		"RDMA_PS_IPOIB":               uintptr(PortSpaceIPoIB), "RDMA_PS_IB": uintptr(PortSpaceIB),
		"RDMA_PS_TCP": uintptr(PortSpaceTCP), "RDMA_PS_UDP": uintptr(PortSpaceUDP),
		"RDMA_USER_CM_QUERY_ADDR": ucmaQueryAddr, "RDMA_USER_CM_QUERY_PATH": ucmaQueryPath, "RDMA_USER_CM_QUERY_GID": ucmaQueryGID,
		"RDMA_MC_JOIN_FLAG_FULLMEMBER": MulticastFullMember, "RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER": MulticastSendOnlyFullMember,
		"sizeof(struct __kernel_sockaddr_storage)": sizeofSockaddrStorage,
		"sizeof(struct sockaddr_in)":               sizeofSockaddrIn, "sizeof(struct sockaddr_in6)": sizeofSockaddrIn6,
	}},
}

func TestABIPinnedToHeaders(t *testing.T) {
	abicheck.Check(t, uapiHeaders, pins)
}

// No raw struct escapes the pins. A command frame is a header and a
// pinned command back to back (TestUCMAFrame).
func TestABIEveryRawStructPinned(t *testing.T) {
	abicheck.CheckAllPinned(t, pins, "ucmaFrame")
}

// A command is written as its header and its struct back to back.
func TestUCMAFrame(t *testing.T) {
	var f ucmaFrame[ucmaCreateID]
	typ := reflect.TypeOf(f)
	if off := typ.Field(1).Offset; off != typ.Field(0).Type.Size() {
		t.Errorf("command at offset %d of its frame, want right after the %d-byte header", off, typ.Field(0).Type.Size())
	}
	if typ.Size() != typ.Field(0).Type.Size()+typ.Field(1).Type.Size() {
		t.Errorf("frame of %d bytes has padding", typ.Size())
	}
}
