package uverbs

// Raw structs of the SRQ write() commands, <rdma/ib_user_verbs.h>;
// pinned by abi_srq_test.go.

// Write command numbers (enum ib_uverbs_write_cmds).
const (
	cmdCreateSRQ  = 32
	cmdModifySRQ  = 33
	cmdQuerySRQ   = 34
	cmdDestroySRQ = 35
)

// createSRQCmd is struct ib_uverbs_create_srq.
type createSRQCmd struct {
	Response   ptr64
	UserHandle uint64
	PDHandle   uint32
	MaxWR      uint32
	MaxSGE     uint32
	SRQLimit   uint32
}

// createSRQResp is struct ib_uverbs_create_srq_resp.
type createSRQResp struct {
	SRQHandle uint32
	MaxWR     uint32
	MaxSGE    uint32
	SRQN      uint32
}

// modifySRQCmd is struct ib_uverbs_modify_srq (it has no response).
type modifySRQCmd struct {
	SRQHandle uint32
	AttrMask  uint32
	MaxWR     uint32
	SRQLimit  uint32
}

// querySRQCmd is struct ib_uverbs_query_srq.
type querySRQCmd struct {
	Response  ptr64
	SRQHandle uint32
	Reserved  uint32
}

// querySRQResp is struct ib_uverbs_query_srq_resp.
type querySRQResp struct {
	MaxWR    uint32
	MaxSGE   uint32
	SRQLimit uint32
	Reserved uint32
}

// destroySRQCmd is struct ib_uverbs_destroy_srq.
type destroySRQCmd struct {
	Response  ptr64
	SRQHandle uint32
	Reserved  uint32
}

// ioctl numbers of the SRQ methods (<rdma/ib_user_ioctl_cmds.h>).
const (
	objectSRQ        = 5 // UVERBS_OBJECT_SRQ
	methodSRQCreate  = 0 // UVERBS_METHOD_SRQ_CREATE
	methodSRQDestroy = 1 // UVERBS_METHOD_SRQ_DESTROY

	attrCreateSRQHandle     = 0  // UVERBS_ATTR_CREATE_SRQ_HANDLE
	attrCreateSRQPDHandle   = 1  // UVERBS_ATTR_CREATE_SRQ_PD_HANDLE
	attrCreateSRQUserHandle = 4  // UVERBS_ATTR_CREATE_SRQ_USER_HANDLE
	attrCreateSRQMaxWR      = 5  // UVERBS_ATTR_CREATE_SRQ_MAX_WR
	attrCreateSRQMaxSGE     = 6  // UVERBS_ATTR_CREATE_SRQ_MAX_SGE
	attrCreateSRQLimit      = 7  // UVERBS_ATTR_CREATE_SRQ_LIMIT
	attrCreateSRQType       = 9  // UVERBS_ATTR_CREATE_SRQ_TYPE
	attrCreateSRQEventFD    = 10 // UVERBS_ATTR_CREATE_SRQ_EVENT_FD
	attrCreateSRQRespMaxWR  = 11 // UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR
	attrCreateSRQRespMaxSGE = 12 // UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE

	attrDestroySRQHandle = 0 // UVERBS_ATTR_DESTROY_SRQ_HANDLE
	attrDestroySRQResp   = 1 // UVERBS_ATTR_DESTROY_SRQ_RESP

	srqTypeBasic = 0 // IB_UVERBS_SRQT_BASIC
)

// destroySRQResp is struct ib_uverbs_destroy_srq_resp.
type destroySRQResp struct {
	EventsReported uint32
}
