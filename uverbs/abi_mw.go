package uverbs

// Write commands for memory windows and re-registration (enum
// ib_uverbs_write_cmds).
const (
	cmdReregMR   = 11
	cmdAllocMW   = 14
	cmdDeallocMW = 16
)

// allocMWCmd is struct ib_uverbs_alloc_mw.
type allocMWCmd struct {
	Response ptr64
	PDHandle uint32
	MWType   uint8
	Reserved [3]uint8
}

// allocMWResp is struct ib_uverbs_alloc_mw_resp.
type allocMWResp struct {
	MWHandle uint32
	RKey     uint32
}

// deallocMWCmd is struct ib_uverbs_dealloc_mw.
type deallocMWCmd struct {
	MWHandle uint32
}

// reregMRCmd is struct ib_uverbs_rereg_mr.
type reregMRCmd struct {
	Response    ptr64
	MRHandle    uint32
	Flags       uint32
	Start       uint64
	Length      uint64
	HCAVA       uint64
	PDHandle    uint32
	AccessFlags uint32
}

// reregMRResp is struct ib_uverbs_rereg_mr_resp.
type reregMRResp struct {
	LKey uint32
	RKey uint32
}

// Flags of ib_uverbs_rereg_mr: the kernel's IB_MR_REREG_* (rdma/ib_verbs.h),
// equal to libibverbs' IBV_REREG_MR_CHANGE_*.
const (
	reregTrans  = 1 << 0
	reregPD     = 1 << 1
	reregAccess = 1 << 2
)
