package uverbs

import (
	"reflect"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs/abicheck"
)

// The RDMA CM structs and constants, pinned to <rdma/rdma_user_cm.h> like
// the rest (TestABIPinnedToHeaders). ahAttrGRH names the grh members that
// ahAttrABI flattens, wherever an address vector is nested.
func init() {
	uapiHeaders = append(uapiHeaders, "rdma/rdma_user_cm.h", "rdma/ib_user_sa.h", "linux/in.h")
	pins = append(pins,
		abicheck.Pin{C: "struct rdma_ucm_create_id", Go: of[ucmaCreateID]()},
		abicheck.Pin{C: "struct rdma_ucm_create_id_resp", Go: of[ucmaCreateIDResp]()},
		abicheck.Pin{C: "struct rdma_ucm_destroy_id", Go: of[ucmaDestroyID]()},
		abicheck.Pin{C: "struct rdma_ucm_destroy_id_resp", Go: of[ucmaDestroyIDResp]()},
		abicheck.Pin{C: "struct rdma_ucm_bind", Go: of[ucmaBind]()},
		abicheck.Pin{C: "struct rdma_ucm_resolve_addr", Go: of[ucmaResolveAddr]()},
		abicheck.Pin{C: "struct rdma_ucm_resolve_route", Go: of[ucmaResolveRoute]()},
		abicheck.Pin{C: "struct rdma_ucm_query", Go: of[ucmaQuery]()},
		abicheck.Pin{C: "struct rdma_ucm_query_addr_resp", Go: of[ucmaQueryAddrResp]()},
		abicheck.Pin{C: "struct ib_path_rec_data", Go: of[pathRecData]()},
		abicheck.Pin{C: "struct rdma_ucm_query_path_resp", Go: of[queryPathRespHdr](), Exprs: map[string]uintptr{
			"offsetof(struct rdma_ucm_query_path_resp, path_data)": reflect.TypeFor[ucmaQueryPathResp]().Field(1).Offset,
		}},
		abicheck.Pin{C: "struct rdma_ucm_conn_param", Go: of[ucmaConnParam]()},
		abicheck.Pin{C: "struct rdma_ucm_ud_param", Go: of[ucmaUDParam](), Rename: ahAttrGRH},
		abicheck.Pin{C: "struct rdma_ucm_ece", Go: of[ucmaECE]()},
		abicheck.Pin{C: "struct rdma_ucm_connect", Go: of[ucmaConnect]()},
		abicheck.Pin{C: "struct rdma_ucm_listen", Go: of[ucmaListen]()},
		abicheck.Pin{C: "struct rdma_ucm_accept", Go: of[ucmaAccept]()},
		abicheck.Pin{C: "struct rdma_ucm_reject", Go: of[ucmaReject]()},
		abicheck.Pin{C: "struct rdma_ucm_disconnect", Go: of[ucmaDisconnect]()},
		abicheck.Pin{C: "struct rdma_ucm_init_qp_attr", Go: of[ucmaInitQPAttr]()},
		abicheck.Pin{C: "struct ib_uverbs_qp_attr", Go: of[ucmaQPAttr](), Rename: ahAttrGRH},
		abicheck.Pin{C: "struct rdma_ucm_notify", Go: of[ucmaNotify]()},
		abicheck.Pin{C: "struct rdma_ucm_join_mcast", Go: of[ucmaJoinMcast]()},
		abicheck.Pin{C: "struct rdma_ucm_get_event", Go: of[ucmaGetEvent]()},
		abicheck.Pin{C: "struct rdma_ucm_event_resp", Go: of[ucmaEventResp]()},
		abicheck.Pin{C: "struct rdma_ucm_set_option", Go: of[ucmaSetOption]()},
		abicheck.Pin{C: "struct rdma_ucm_migrate_id", Go: of[ucmaMigrateID]()},
		abicheck.Pin{C: "struct rdma_ucm_migrate_resp", Go: of[ucmaMigrateResp]()},
		// The header's struct, with the header's constants.
		abicheck.Pin{C: "struct rdma_ucm_cmd_hdr", Go: of[ucmaCmdHdr](), Exprs: map[string]uintptr{
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
	)
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
