package uverbs

import (
	"encoding/binary"
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
	}
}
