package uverbs

import (
	"encoding/binary"
)

// Device capability bits of DeviceAttr.DeviceCapFlags (enum
// ib_uverbs_device_cap_flags) that feature probes read.
const (
	DeviceCapFlushGlobal     uint64 = 1 << 38 // IB_UVERBS_DEVICE_FLUSH_GLOBAL: FLUSH to global visibility
	DeviceCapFlushPersistent uint64 = 1 << 39 // IB_UVERBS_DEVICE_FLUSH_PERSISTENT: FLUSH to persistence
	DeviceCapAtomicWrite     uint64 = 1 << 40 // IB_UVERBS_DEVICE_ATOMIC_WRITE
)

// DeviceAttr is what the extended QUERY_DEVICE command reports (the fields of
// struct ibv_device_attr_ex that pureverbs uses).
type DeviceAttr struct {
	FWVer           uint64
	NodeGUID        uint64
	SysImageGUID    uint64
	MaxMRSize       uint64
	PageSizeCap     uint64
	VendorID        uint32
	VendorPartID    uint32
	HWVer           uint32
	MaxQP           int
	MaxQPWR         int
	DeviceCapFlags  uint64 // IB_UVERBS_DEVICE_* (64-bit extended set)
	MaxSGE          int
	MaxSGERd        int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxQPRdAtom     int
	MaxResRdAtom    int
	MaxQPInitRdAtom int
	AtomicCap       uint32
	MaxMW           int
	MaxAH           int
	MaxSRQ          int
	MaxSRQWR        int
	MaxSRQSGE       int
	MaxMcastGrp     int
	MaxPKeys        int
	LocalCAAckDelay uint8
	PhysPortCnt     int
	TimestampMask   uint64
	HCACoreClock    uint64 // kHz

	// The rest of struct ibv_device_attr_ex, as the kernel reports it
	// (what ibv_devinfo -v prints).
	BaseCapFlags          uint32 // device_cap_flags of the base response (32 bits, ibv_device_attr's)
	ExCapFlags            uint64 // device_cap_flags_ex as sent, 0 when the kernel's response ends before it
	MaxEERdAtom           int
	MaxEEInitRdAtom       int
	MaxEE                 int
	MaxRDD                int
	MaxRawIPv6QP          int
	MaxRawEthyQP          int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	MaxFMR                int
	MaxMapPerFMR          int
	ODP                   ODPCaps
	RSS                   RSSCaps
	MaxWQTypeRQ           int
	RawPacketCaps         uint32 // IB_UVERBS_RAW_PACKET_CAP_*
	TM                    TMCaps
	CQModeration          CQModerationCaps
	MaxDMSize             uint64
}

// ODPCaps is the on-demand paging support of a device (struct
// ib_uverbs_odp_caps plus xrc_odp_caps); rxe reports none.
type ODPCaps struct {
	General uint64 // IB_UVERBS_ODP_SUPPORT*
	RC      uint32 // per-transport IB_UVERBS_ODP_SUPPORT_* bits
	UC      uint32
	UD      uint32
	XRC     uint32
}

// RSSCaps is struct ib_uverbs_rss_caps.
type RSSCaps struct {
	SupportedQPTs              uint32 // bit n set: QP type n supports RSS
	MaxRWQIndirectionTables    int
	MaxRWQIndirectionTableSize int
}

// TMCaps is struct ib_uverbs_tm_caps (tag matching).
type TMCaps struct {
	MaxRndvHdrSize int
	MaxNumTags     int
	Flags          uint32
	MaxOps         int
	MaxSGE         int
}

// CQModerationCaps is struct ib_uverbs_cq_moderation_caps.
type CQModerationCaps struct {
	MaxCount  int
	MaxPeriod int // microseconds
}

// be64 turns a __be64 field read as a native integer into its value.
func be64(v uint64) uint64 {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

// QueryDevice returns the device attributes, using the extended
// QUERY_DEVICE command (struct ib_uverbs_ex_query_device) as libibverbs does.
func (c *Context) QueryDevice() (DeviceAttr, error) {
	var f exWriteFrame[exQueryDeviceCmd]
	var resp respFrame[exQueryDeviceResp]
	if err := execWriteEx(c, "query_device_ex", cmdQueryDevice, &f, &resp, nil, 0); err != nil {
		return DeviceAttr{}, err
	}
	return deviceAttrFrom(&resp.resp), nil
}

func deviceAttrFrom(r *exQueryDeviceResp) DeviceAttr {
	b := &r.Base
	return DeviceAttr{
		FWVer:           b.FWVer,
		NodeGUID:        be64(b.NodeGUID),
		SysImageGUID:    be64(b.SysImageGUID),
		MaxMRSize:       b.MaxMRSize,
		PageSizeCap:     b.PageSizeCap,
		VendorID:        b.VendorID,
		VendorPartID:    b.VendorPartID,
		HWVer:           b.HWVer,
		MaxQP:           int(b.MaxQP),
		MaxQPWR:         int(b.MaxQPWR),
		DeviceCapFlags:  r.DeviceCapFlagsEx | uint64(b.DeviceCapFlags),
		MaxSGE:          int(b.MaxSGE),
		MaxSGERd:        int(b.MaxSGERd),
		MaxCQ:           int(b.MaxCQ),
		MaxCQE:          int(b.MaxCQE),
		MaxMR:           int(b.MaxMR),
		MaxPD:           int(b.MaxPD),
		MaxQPRdAtom:     int(b.MaxQPRdAtom),
		MaxResRdAtom:    int(b.MaxResRdAtom),
		MaxQPInitRdAtom: int(b.MaxQPInitRdAtom),
		AtomicCap:       b.AtomicCap,
		MaxMW:           int(b.MaxMW),
		MaxAH:           int(b.MaxAH),
		MaxSRQ:          int(b.MaxSRQ),
		MaxSRQWR:        int(b.MaxSRQWR),
		MaxSRQSGE:       int(b.MaxSRQSGE),
		MaxMcastGrp:     int(b.MaxMcastGrp),
		MaxPKeys:        int(b.MaxPKeys),
		LocalCAAckDelay: b.LocalCAAckDelay,
		PhysPortCnt:     int(b.PhysPortCnt),
		TimestampMask:   r.TimestampMask,
		HCACoreClock:    r.HCACoreClock,

		BaseCapFlags:          b.DeviceCapFlags,
		ExCapFlags:            r.DeviceCapFlagsEx,
		MaxEERdAtom:           int(b.MaxEERdAtom),
		MaxEEInitRdAtom:       int(b.MaxEEInitRdAtom),
		MaxEE:                 int(b.MaxEE),
		MaxRDD:                int(b.MaxRDD),
		MaxRawIPv6QP:          int(b.MaxRawIPv6QP),
		MaxRawEthyQP:          int(b.MaxRawEthyQP),
		MaxMcastQPAttach:      int(b.MaxMcastQPAttach),
		MaxTotalMcastQPAttach: int(b.MaxTotalMcastQPAttach),
		MaxFMR:                int(b.MaxFMR),
		MaxMapPerFMR:          int(b.MaxMapPerFMR),
		ODP: ODPCaps{General: r.ODPCaps.GeneralCaps, RC: r.ODPCaps.RCODPCaps, UC: r.ODPCaps.UCODPCaps,
			UD: r.ODPCaps.UDODPCaps, XRC: r.XRCODPCaps},
		RSS: RSSCaps{SupportedQPTs: r.RSSCaps.SupportedQPTs, MaxRWQIndirectionTables: int(r.RSSCaps.MaxRWQIndirectionTables),
			MaxRWQIndirectionTableSize: int(r.RSSCaps.MaxRWQIndirectionTableSize)},
		MaxWQTypeRQ:   int(r.MaxWQTypeRQ),
		RawPacketCaps: r.RawPacketCaps,
		TM: TMCaps{MaxRndvHdrSize: int(r.TMCaps.MaxRndvHdrSize), MaxNumTags: int(r.TMCaps.MaxNumTags),
			Flags: r.TMCaps.Flags, MaxOps: int(r.TMCaps.MaxOps), MaxSGE: int(r.TMCaps.MaxSGE)},
		CQModeration: CQModerationCaps{MaxCount: int(r.CQModerationCaps.MaxCQModerationCount),
			MaxPeriod: int(r.CQModerationCaps.MaxCQModerationPeriod)},
		MaxDMSize: r.MaxDMSize,
	}
}
