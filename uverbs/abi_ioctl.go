package uverbs

// Raw structs and numbers of the ioctl method/attribute interface:
// <rdma/rdma_user_ioctl_cmds.h>, <rdma/ib_user_ioctl_cmds.h> and
// <rdma/ib_user_ioctl_verbs.h>. Pinned by abi_test.go.

// rdmaVerbsIoctl is RDMA_VERBS_IOCTL, _IOWR(0x1b, 1, struct
// ib_uverbs_ioctl_hdr); the generic _IOC encoding is the same on amd64 and
// arm64.
const rdmaVerbsIoctl = 0xc0181b01

// Attribute flags (UVERBS_ATTR_F_*).
const (
	attrFMandatory   = 1 << 0
	attrFValidOutput = 1 << 1
)

// Objects, methods and attribute ids used here.
const (
	objectDevice = 0 // UVERBS_OBJECT_DEVICE
	objectPD     = 1 // UVERBS_OBJECT_PD
	objectCQ     = 3 // UVERBS_OBJECT_CQ
	objectQP     = 4 // UVERBS_OBJECT_QP
	objectMR     = 7 // UVERBS_OBJECT_MR

	// Driver udata (UVERBS_ATTR_UHW_IN/OUT): the first ids of the driver
	// namespace, UVERBS_UDATA_DRIVER_DATA_FLAG = 1 << UVERBS_ID_NS_SHIFT.
	attrUHWIn  = 0x1000
	attrUHWOut = 0x1001

	methodCQCreate  = 0 // UVERBS_METHOD_CQ_CREATE
	methodCQDestroy = 1 // UVERBS_METHOD_CQ_DESTROY
	methodQPCreate  = 0 // UVERBS_METHOD_QP_CREATE
	methodQPDestroy = 1 // UVERBS_METHOD_QP_DESTROY
	methodMRDestroy = 1 // UVERBS_METHOD_MR_DESTROY
	methodPDDestroy = 0 // UVERBS_METHOD_PD_DESTROY

	attrCreateCQHandle      = 0 // UVERBS_ATTR_CREATE_CQ_HANDLE
	attrCreateCQCQE         = 1 // UVERBS_ATTR_CREATE_CQ_CQE
	attrCreateCQUserHandle  = 2 // UVERBS_ATTR_CREATE_CQ_USER_HANDLE
	attrCreateCQCompChannel = 3 // UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL
	attrCreateCQCompVector  = 4 // UVERBS_ATTR_CREATE_CQ_COMP_VECTOR
	attrCreateCQRespCQE     = 6 // UVERBS_ATTR_CREATE_CQ_RESP_CQE
	attrCreateCQEventFD     = 7 // UVERBS_ATTR_CREATE_CQ_EVENT_FD

	attrCreateQPHandle     = 0  // UVERBS_ATTR_CREATE_QP_HANDLE
	attrCreateQPPDHandle   = 2  // UVERBS_ATTR_CREATE_QP_PD_HANDLE
	attrCreateQPSRQHandle  = 3  // UVERBS_ATTR_CREATE_QP_SRQ_HANDLE
	attrCreateQPSendCQ     = 4  // UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE
	attrCreateQPRecvCQ     = 5  // UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE
	attrCreateQPUserHandle = 7  // UVERBS_ATTR_CREATE_QP_USER_HANDLE
	attrCreateQPCap        = 8  // UVERBS_ATTR_CREATE_QP_CAP
	attrCreateQPType       = 9  // UVERBS_ATTR_CREATE_QP_TYPE
	attrCreateQPFlags      = 10 // UVERBS_ATTR_CREATE_QP_FLAGS
	attrCreateQPEventFD    = 12 // UVERBS_ATTR_CREATE_QP_EVENT_FD
	attrCreateQPRespCap    = 13 // UVERBS_ATTR_CREATE_QP_RESP_CAP
	attrCreateQPRespQPNum  = 14 // UVERBS_ATTR_CREATE_QP_RESP_QP_NUM

	// createQPSQSigAll is IB_UVERBS_QP_CREATE_SQ_SIG_ALL in the flags.
	createQPSQSigAll = 1 << 12

	attrDestroyCQHandle = 0 // UVERBS_ATTR_DESTROY_CQ_HANDLE
	attrDestroyCQResp   = 1 // UVERBS_ATTR_DESTROY_CQ_RESP
	attrDestroyQPHandle = 0 // UVERBS_ATTR_DESTROY_QP_HANDLE
	attrDestroyQPResp   = 1 // UVERBS_ATTR_DESTROY_QP_RESP
	attrDestroyMRHandle = 0 // UVERBS_ATTR_DESTROY_MR_HANDLE
	attrDestroyPDHandle = 0 // UVERBS_ATTR_DESTROY_PD_HANDLE

	methodQueryGIDTable = 5 // UVERBS_METHOD_QUERY_GID_TABLE
	methodQueryGIDEntry = 6 // UVERBS_METHOD_QUERY_GID_ENTRY

	attrQueryGIDTableEntrySize     = 0 // UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE
	attrQueryGIDTableFlags         = 1 // UVERBS_ATTR_QUERY_GID_TABLE_FLAGS
	attrQueryGIDTableRespEntries   = 2 // UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES
	attrQueryGIDTableRespNumEntrys = 3 // UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES

	attrQueryGIDEntryPort      = 0 // UVERBS_ATTR_QUERY_GID_ENTRY_PORT
	attrQueryGIDEntryGIDIndex  = 1 // UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX
	attrQueryGIDEntryFlags     = 2 // UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS
	attrQueryGIDEntryRespEntry = 3 // UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY
)

// ioctlHdr is struct ib_uverbs_ioctl_hdr; the attributes follow it.
type ioctlHdr struct {
	Length    uint16
	ObjectID  uint16
	MethodID  uint16
	NumAttrs  uint16
	Reserved1 uint64
	DriverID  uint32
	Reserved2 uint32
}

// ioctlAttr is struct ib_uverbs_attr. Data holds inline values (up to 8
// bytes) or a user pointer; pointers are pinned by ioctlBuf for the call.
type ioctlAttr struct {
	AttrID   uint16
	Len      uint16
	Flags    uint16
	AttrData uint16 // enum_data.elem_id in the low byte, or reserved
	Data     uint64
}

// gidEntry is struct ib_uverbs_gid_entry.
type gidEntry struct {
	GID           [16]byte // __aligned_u64 gid[2], raw network order
	GIDIndex      uint32
	PortNum       uint32
	GIDType       uint32
	NetdevIfindex uint32
}
