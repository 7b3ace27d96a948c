package ucma

import "github.com/pureverbs/pureverbs/uverbs"

// Raw structs of the RDMA CM user interface, <rdma/rdma_user_cm.h> (ABI 4):
// commands written to /dev/infiniband/rdma_cm as a header followed by the
// command's struct. Field names follow the C names. Every struct is pinned
// to the header by ucma_abi_test.go (package abicheck: gcc derives each
// size and offset).

// ucmaABIVersion is RDMA_USER_CM_ABI_VERSION, the only one these layouts
// match (/sys/class/misc/rdma_cm/abi_version).
const ucmaABIVersion = 4

// RDMA CM command numbers (the anonymous enum RDMA_USER_CM_CMD_*).
const (
	ucmaCmdCreateID     = 0
	ucmaCmdDestroyID    = 1
	ucmaCmdBindIP       = 2
	ucmaCmdResolveIP    = 3
	ucmaCmdResolveRoute = 4
	ucmaCmdQueryRoute   = 5
	ucmaCmdConnect      = 6
	ucmaCmdListen       = 7
	ucmaCmdAccept       = 8
	ucmaCmdReject       = 9
	ucmaCmdDisconnect   = 10
	ucmaCmdInitQPAttr   = 11
	ucmaCmdGetEvent     = 12
	ucmaCmdGetOption    = 13
	ucmaCmdSetOption    = 14
	ucmaCmdNotify       = 15
	ucmaCmdJoinIPMcast  = 16
	ucmaCmdLeaveMcast   = 17
	ucmaCmdMigrateID    = 18
	ucmaCmdQuery        = 19
	ucmaCmdBind         = 20
	ucmaCmdResolveAddr  = 21
	ucmaCmdJoinMcast    = 22
)

// QUERY options (RDMA_USER_CM_QUERY_*).
const (
	ucmaQueryAddr = 0
	ucmaQueryPath = 1
	ucmaQueryGID  = 2
)

// ucmaMaxPrivateData is RDMA_MAX_PRIVATE_DATA, the size of every private
// data buffer in the ABI (the wire carries less; see MaxPrivateData*).
const ucmaMaxPrivateData = 256

// sizeofSockaddrStorage is sizeof(struct __kernel_sockaddr_storage).
const sizeofSockaddrStorage = 128

// sockaddrStorage is struct __kernel_sockaddr_storage: a sockaddr_in,
// sockaddr_in6 or sockaddr_ib in 128 bytes. C aligns it to 8 bytes; every
// struct here that holds one places it at a multiple of 8 already, which
// the layout test checks.
type sockaddrStorage [sizeofSockaddrStorage]byte

// ucmaCmdHdr is struct rdma_ucm_cmd_hdr: In is the size of the command
// struct that follows, Out the size of the response the kernel may write.
type ucmaCmdHdr struct {
	Cmd uint32
	In  uint16
	Out uint16
}

// ucmaCreateID is struct rdma_ucm_create_id.
type ucmaCreateID struct {
	UID      uint64
	Response ptr64
	PS       uint16
	QPType   uint8
	Reserved [5]uint8
}

// ucmaCreateIDResp is struct rdma_ucm_create_id_resp (also the response of
// the multicast joins).
type ucmaCreateIDResp struct {
	ID uint32
}

// ucmaDestroyID is struct rdma_ucm_destroy_id (also the layout of
// LEAVE_MCAST).
type ucmaDestroyID struct {
	Response ptr64
	ID       uint32
	Reserved uint32
}

// ucmaDestroyIDResp is struct rdma_ucm_destroy_id_resp.
type ucmaDestroyIDResp struct {
	EventsReported uint32
}

// ucmaBind is struct rdma_ucm_bind.
type ucmaBind struct {
	ID       uint32
	AddrSize uint16
	Reserved uint16
	Addr     sockaddrStorage
}

// ucmaResolveAddr is struct rdma_ucm_resolve_addr.
type ucmaResolveAddr struct {
	ID        uint32
	TimeoutMS uint32
	SrcSize   uint16
	DstSize   uint16
	Reserved  uint32
	SrcAddr   sockaddrStorage
	DstAddr   sockaddrStorage
}

// ucmaResolveRoute is struct rdma_ucm_resolve_route.
type ucmaResolveRoute struct {
	ID        uint32
	TimeoutMS uint32
}

// ucmaQuery is struct rdma_ucm_query.
type ucmaQuery struct {
	Response ptr64
	ID       uint32
	Option   uint32
}

// ucmaQueryAddrResp is struct rdma_ucm_query_addr_resp, also the response
// of QUERY_GID (with sockaddr_ib addresses).
type ucmaQueryAddrResp struct {
	NodeGUID   uint64 // network order, as the device holds it
	PortNum    uint8
	Reserved   uint8
	PKey       uint16
	SrcSize    uint16
	DstSize    uint16
	SrcAddr    sockaddrStorage
	DstAddr    sockaddrStorage
	IBDevIndex uint32
	Reserved1  uint32
}

// pathRecData is struct ib_path_rec_data: one path record in the wire
// format of the SA (big-endian, 64 bytes).
type pathRecData struct {
	Flags    uint32
	Reserved uint32
	PathRec  [16]uint32
}

// queryPathRespHdr is struct rdma_ucm_query_path_resp without its flexible
// path_data array.
type queryPathRespHdr struct {
	NumPaths uint32
	Reserved uint32
}

// ucmaQueryPathResp is the QUERY PATH answer as it is received: the
// header, then room for the two path records the kernel reports at most
// (primary and alternate).
type ucmaQueryPathResp struct {
	queryPathRespHdr
	PathData [2]pathRecData
}

// ucmaConnParam is struct rdma_ucm_conn_param.
type ucmaConnParam struct {
	QPNum              uint32
	QKey               uint32
	PrivateData        [ucmaMaxPrivateData]uint8
	PrivateDataLen     uint8
	SRQ                uint8
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
	Valid              uint8
}

// ucmaUDParam is struct rdma_ucm_ud_param.
type ucmaUDParam struct {
	QPNum          uint32
	QKey           uint32
	AHAttr         uverbs.AHAttrABI
	PrivateData    [ucmaMaxPrivateData]uint8
	PrivateDataLen uint8
	Reserved       [7]uint8
}

// ucmaECE is struct rdma_ucm_ece (enhanced connection establishment).
type ucmaECE struct {
	VendorID uint32
	AttrMod  uint32
}

// ucmaConnect is struct rdma_ucm_connect.
type ucmaConnect struct {
	ConnParam ucmaConnParam
	ID        uint32
	Reserved  uint32
	ECE       ucmaECE
}

// ucmaListen is struct rdma_ucm_listen.
type ucmaListen struct {
	ID      uint32
	Backlog uint32
}

// ucmaAccept is struct rdma_ucm_accept.
type ucmaAccept struct {
	UID       uint64
	ConnParam ucmaConnParam
	ID        uint32
	Reserved  uint32
	ECE       ucmaECE
}

// ucmaReject is struct rdma_ucm_reject.
type ucmaReject struct {
	ID             uint32
	PrivateDataLen uint8
	Reason         uint8
	Reserved       [2]uint8
	PrivateData    [ucmaMaxPrivateData]uint8
}

// ucmaDisconnect is struct rdma_ucm_disconnect.
type ucmaDisconnect struct {
	ID uint32
}

// ucmaInitQPAttr is struct rdma_ucm_init_qp_attr.
type ucmaInitQPAttr struct {
	Response ptr64
	ID       uint32
	QPState  uint32
}

// ucmaNotify is struct rdma_ucm_notify.
type ucmaNotify struct {
	ID    uint32
	Event uint32
}

// ucmaJoinMcast is struct rdma_ucm_join_mcast.
type ucmaJoinMcast struct {
	Response  ptr64
	UID       uint64
	ID        uint32
	AddrSize  uint16
	JoinFlags uint16
	Addr      sockaddrStorage
}

// ucmaGetEvent is struct rdma_ucm_get_event.
type ucmaGetEvent struct {
	Response ptr64
}

// ucmaEventResp is struct rdma_ucm_event_resp. Param is the union of
// struct rdma_ucm_conn_param (connected port spaces) and struct
// rdma_ucm_ud_param (UDP and multicast events); it starts at offset 20, so
// it is only 4-byte aligned, as both members are.
type ucmaEventResp struct {
	UID      uint64
	ID       uint32
	Event    uint32
	Status   uint32
	Param    [304]uint8
	Reserved uint32
	ECE      ucmaECE
}

// ucmaSetOption is struct rdma_ucm_set_option.
type ucmaSetOption struct {
	OptVal  ptr64
	ID      uint32
	Level   uint32
	OptName uint32
	OptLen  uint32
}

// ucmaMigrateID is struct rdma_ucm_migrate_id: written on the channel the id
// moves to, Fd naming the channel it leaves.
type ucmaMigrateID struct {
	Response ptr64
	ID       uint32
	FD       uint32
}

// ucmaMigrateResp is struct rdma_ucm_migrate_resp.
type ucmaMigrateResp struct {
	EventsReported uint32
}
