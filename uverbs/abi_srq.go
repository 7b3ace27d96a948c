package uverbs

// Raw structs of the SRQ and CQ-resize write() commands,
// <rdma/ib_user_verbs.h>; pinned by abi_srq_test.go.

// Write command numbers (enum ib_uverbs_write_cmds).
const (
	cmdResizeCQ   = 19
	cmdCreateSRQ  = 36
	cmdModifySRQ  = 37
	cmdQuerySRQ   = 38
	cmdDestroySRQ = 39
)

// resizeCQCmd is struct ib_uverbs_resize_cq.
type resizeCQCmd struct {
	Response ptr64
	CQHandle uint32
	CQE      uint32
}

// resizeCQResp is struct ib_uverbs_resize_cq_resp.
type resizeCQResp struct {
	CQE      uint32
	Reserved uint32
}

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

// destroySRQResp is struct ib_uverbs_destroy_srq_resp.
type destroySRQResp struct {
	EventsReported uint32
}
