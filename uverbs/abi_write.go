package uverbs

// Raw structs of the write() command interface, <rdma/ib_user_verbs.h>.
// Field names follow the C names; flexible driver_data arrays are left out
// (driver data travels after the struct, see execWrite). Sizes and offsets
// are pinned by abi_test.go.

// Write command numbers (enum ib_uverbs_write_cmds).
const (
	cmdGetContext        = 0
	cmdQueryDevice       = 1
	cmdQueryPort         = 2
	cmdAllocPD           = 3
	cmdDeallocPD         = 4
	cmdRegMR             = 9
	cmdDeregMR           = 13
	cmdCreateCompChannel = 17
	cmdCreateCQ          = 18
	cmdResizeCQ          = 19
	cmdDestroyCQ         = 20
	cmdReqNotifyCQ       = 23
	cmdCreateQP          = 24
	cmdQueryQP           = 25
	cmdModifyQP          = 26
	cmdDestroyQP         = 27
	cmdPostSend          = 28

	// cmdFlagExtended marks a command with struct ib_uverbs_ex_cmd_hdr
	// (IB_USER_VERBS_CMD_FLAG_EXTENDED).
	cmdFlagExtended = 0x80000000

	// commandABIVersion is IB_USER_VERBS_ABI_VERSION, the only uverbs
	// command ABI these layouts match.
	commandABIVersion = 6
)

// cmdHdr is struct ib_uverbs_cmd_hdr.
type cmdHdr struct {
	Command  uint32
	InWords  uint16
	OutWords uint16
}

// exCmdHdr is struct ib_uverbs_ex_cmd_hdr.
type exCmdHdr struct {
	Response         ptr64
	ProviderInWords  uint16
	ProviderOutWords uint16
	CmdHdrReserved   uint32
}

// getContextCmd is struct ib_uverbs_get_context.
type getContextCmd struct {
	Response ptr64
}

// getContextResp is struct ib_uverbs_get_context_resp.
type getContextResp struct {
	AsyncFD        uint32
	NumCompVectors uint32
}

// exQueryDeviceCmd is struct ib_uverbs_ex_query_device.
type exQueryDeviceCmd struct {
	CompMask uint32
	Reserved uint32
}

// queryDeviceResp is struct ib_uverbs_query_device_resp.
type queryDeviceResp struct {
	FWVer                 uint64
	NodeGUID              uint64 // __be64
	SysImageGUID          uint64 // __be64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 uint32
	MaxQPWR               uint32
	DeviceCapFlags        uint32
	MaxSGE                uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxEERdAtom           uint32
	MaxResRdAtom          uint32
	MaxQPInitRdAtom       uint32
	MaxEEInitRdAtom       uint32
	AtomicCap             uint32
	MaxEE                 uint32
	MaxRDD                uint32
	MaxMW                 uint32
	MaxRawIPv6QP          uint32
	MaxRawEthyQP          uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxFMR                uint32
	MaxMapPerFMR          uint32
	MaxSRQ                uint32
	MaxSRQWR              uint32
	MaxSRQSGE             uint32
	MaxPKeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8
	Reserved              [4]uint8
}

// odpCaps is struct ib_uverbs_odp_caps.
type odpCaps struct {
	GeneralCaps uint64
	RCODPCaps   uint32
	UCODPCaps   uint32
	UDODPCaps   uint32
	Reserved    uint32
}

// rssCaps is struct ib_uverbs_rss_caps.
type rssCaps struct {
	SupportedQPTs              uint32
	MaxRWQIndirectionTables    uint32
	MaxRWQIndirectionTableSize uint32
	Reserved                   uint32
}

// tmCaps is struct ib_uverbs_tm_caps.
type tmCaps struct {
	MaxRndvHdrSize uint32
	MaxNumTags     uint32
	Flags          uint32
	MaxOps         uint32
	MaxSGE         uint32
	Reserved       uint32
}

// cqModerationCaps is struct ib_uverbs_cq_moderation_caps.
type cqModerationCaps struct {
	MaxCQModerationCount  uint16
	MaxCQModerationPeriod uint16
	Reserved              uint32
}

// exQueryDeviceResp is struct ib_uverbs_ex_query_device_resp.
type exQueryDeviceResp struct {
	Base             queryDeviceResp
	CompMask         uint32
	ResponseLength   uint32
	ODPCaps          odpCaps
	TimestampMask    uint64
	HCACoreClock     uint64
	DeviceCapFlagsEx uint64
	RSSCaps          rssCaps
	MaxWQTypeRQ      uint32
	RawPacketCaps    uint32
	TMCaps           tmCaps
	CQModerationCaps cqModerationCaps
	MaxDMSize        uint64
	XRCODPCaps       uint32
	Reserved         uint32
}

// queryPortCmd is struct ib_uverbs_query_port.
type queryPortCmd struct {
	Response ptr64
	PortNum  uint8
	Reserved [7]uint8
}

// queryPortResp is struct ib_uverbs_query_port_resp.
type queryPortResp struct {
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	GIDTblLen     uint32
	PKeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	State         uint8
	MaxMTU        uint8
	ActiveMTU     uint8
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	Reserved      uint8
}

// allocPDCmd is struct ib_uverbs_alloc_pd.
type allocPDCmd struct {
	Response ptr64
}

// allocPDResp is struct ib_uverbs_alloc_pd_resp.
type allocPDResp struct {
	PDHandle uint32
}

// deallocPDCmd is struct ib_uverbs_dealloc_pd.
type deallocPDCmd struct {
	PDHandle uint32
}

// regMRCmd is struct ib_uverbs_reg_mr. Start is the address of off-heap
// memory (a Buffer), never Go heap, so a plain integer is right here.
type regMRCmd struct {
	Response    ptr64
	Start       uint64
	Length      uint64
	HCAVA       uint64
	PDHandle    uint32
	AccessFlags uint32
}

// regMRResp is struct ib_uverbs_reg_mr_resp.
type regMRResp struct {
	MRHandle uint32
	LKey     uint32
	RKey     uint32
}

// deregMRCmd is struct ib_uverbs_dereg_mr.
type deregMRCmd struct {
	MRHandle uint32
}

// createCompChannelCmd is struct ib_uverbs_create_comp_channel.
type createCompChannelCmd struct {
	Response ptr64
}

// createCompChannelResp is struct ib_uverbs_create_comp_channel_resp.
type createCompChannelResp struct {
	FD uint32
}

// createCQCmd is struct ib_uverbs_create_cq.
type createCQCmd struct {
	Response    ptr64
	UserHandle  uint64
	CQE         uint32
	CompVector  uint32
	CompChannel int32
	Reserved    uint32
}

// createCQResp is struct ib_uverbs_create_cq_resp.
type createCQResp struct {
	CQHandle uint32
	CQE      uint32
}

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

// reqNotifyCQCmd is struct ib_uverbs_req_notify_cq.
type reqNotifyCQCmd struct {
	CQHandle      uint32
	SolicitedOnly uint32
}

// destroyCQCmd is struct ib_uverbs_destroy_cq.
type destroyCQCmd struct {
	Response ptr64
	CQHandle uint32
	Reserved uint32
}

// destroyCQResp is struct ib_uverbs_destroy_cq_resp.
type destroyCQResp struct {
	CompEventsReported  uint32
	AsyncEventsReported uint32
}

// compEventDesc is struct ib_uverbs_comp_event_desc, read from a completion
// channel.
type compEventDesc struct {
	CQHandle uint64
}

// asyncEventDesc is struct ib_uverbs_async_event_desc, read from the async
// event fd.
type asyncEventDesc struct {
	Element   uint64
	EventType uint32
	Reserved  uint32
}

// createQPCmd is struct ib_uverbs_create_qp.
type createQPCmd struct {
	Response      ptr64
	UserHandle    uint64
	PDHandle      uint32
	SendCQHandle  uint32
	RecvCQHandle  uint32
	SRQHandle     uint32
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
	SQSigAll      uint8
	QPType        uint8
	IsSRQ         uint8
	Reserved      uint8
}

// createQPResp is struct ib_uverbs_create_qp_resp.
type createQPResp struct {
	QPHandle      uint32
	QPN           uint32
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
	Reserved      uint32
}

// qpDest is struct ib_uverbs_qp_dest, the address vector of modify/query QP.
type qpDest struct {
	DGID         [16]uint8
	FlowLabel    uint32
	DLID         uint16
	Reserved     uint16
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     uint8
	PortNum      uint8
}

// modifyQPCmd is struct ib_uverbs_modify_qp (it has no response).
type modifyQPCmd struct {
	Dest             qpDest
	AltDest          qpDest
	QPHandle         uint32
	AttrMask         uint32
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    uint32
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	QPState          uint8
	CurQPState       uint8
	PathMTU          uint8
	PathMigState     uint8
	EnSQDAsyncNotify uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [2]uint8
}

// queryQPCmd is struct ib_uverbs_query_qp.
type queryQPCmd struct {
	Response ptr64
	QPHandle uint32
	AttrMask uint32
}

// queryQPResp is struct ib_uverbs_query_qp_resp.
type queryQPResp struct {
	Dest            qpDest
	AltDest         qpDest
	MaxSendWR       uint32
	MaxRecvWR       uint32
	MaxSendSGE      uint32
	MaxRecvSGE      uint32
	MaxInlineData   uint32
	QKey            uint32
	RQPSN           uint32
	SQPSN           uint32
	DestQPNum       uint32
	QPAccessFlags   uint32
	PKeyIndex       uint16
	AltPKeyIndex    uint16
	QPState         uint8
	CurQPState      uint8
	PathMTU         uint8
	PathMigState    uint8
	SQDraining      uint8
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8
	PortNum         uint8
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
	AltPortNum      uint8
	AltTimeout      uint8
	SQSigAll        uint8
	Reserved        [5]uint8
}

// destroyQPCmd is struct ib_uverbs_destroy_qp.
type destroyQPCmd struct {
	Response ptr64
	QPHandle uint32
	Reserved uint32
}

// destroyQPResp is struct ib_uverbs_destroy_qp_resp.
type destroyQPResp struct {
	EventsReported uint32
}

// postSendCmd is struct ib_uverbs_post_send without its send_wr array.
type postSendCmd struct {
	Response ptr64
	QPHandle uint32
	WRCount  uint32
	SGECount uint32
	WQESize  uint32
}

// postSendResp is struct ib_uverbs_post_send_resp.
type postSendResp struct {
	BadWR uint32
}

const (
	// sizeofSendWR is sizeof(struct ib_uverbs_send_wr), the smallest
	// wqe_size the kernel accepts in POST_SEND.
	sizeofSendWR = 56
	// doorbellWQESize is the wqe_size librxe (rdma-core 44) puts in its
	// zero-WR POST_SEND doorbell: sizeof(struct ibv_send_wr) on 64-bit.
	doorbellWQESize = 128
)
